package stream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// DecodeEvent reads an event in one pass over its bytes. The event's
// object, most of the message, is read once: decoded into a map in that
// same pass when decode says its kind needs it (the ingester judges its
// health from the map), otherwise only scanned and kept as bytes.
// encoding/json would read it four times: a validation pass of the whole
// message, a pass to find the end of the raw object, and both again to
// decode the object for its health (docs/benchmarks.md, "The inventory at
// design size").
//
// decode is asked with the apiVersion and kind read before the object: an
// agent writes them first, another writer may not, and then both are
// empty. The object map is nil when decode declined it or when the object
// is not a JSON object.
//
// It reads what encoding/json reads for Event, by encoding/json's rules
// (jsonv1.DefaultOptionsV1: a name given twice keeps its last value,
// replaced whole as PostgreSQL's jsonb keeps it, and invalid UTF-8 is
// accepted), so that the object judged is the object stored; except that
// the event's field names must match exactly, as every agent writes them.
// An object that is valid JSON but does not decode (a number beyond a
// float64) is kept as bytes with no map, as encoding/json kept it, for
// the caller to judge as undecodable.
func DecodeEvent(data []byte, decode func(apiVersion, kind string) bool) (*Event, map[string]any, error) {
	dec := decoders.Get().(*jsontext.Decoder)
	defer decoders.Put(dec)
	dec.Reset(bytes.NewBuffer(data), strict)
	if ev, obj, err := decodeEvent(dec, data, decode, strict); err == nil {
		return ev, obj, nil
	}
	// A name given twice, invalid UTF-8, a value that does not fit its
	// Go type or bad JSON: read again by encoding/json's rules, which
	// say what, if anything, the event is.
	dec.Reset(bytes.NewBuffer(data), legacy)
	return decodeEvent(dec, data, decode, legacy)
}

// strict is JSON as RFC 8259 wants it, which every agent writes and the
// decoder reads fastest; legacy is encoding/json's rules.
var (
	strict = jsonv2.JoinOptions()
	legacy = jsonv1.DefaultOptionsV1()
)

// decoders are reused: a decoder's buffers are most of what reading an
// event allocates.
var decoders = sync.Pool{New: func() any { return jsontext.NewDecoder(bytes.NewBuffer(nil)) }}

func decodeEvent(dec *jsontext.Decoder, data []byte, decode func(apiVersion, kind string) bool, opts jsonv2.Options) (*Event, map[string]any, error) {
	ev := &Event{}
	switch tok, err := dec.ReadToken(); {
	case err != nil:
		return nil, nil, err
	case tok.Kind() == 'n':
		// A null is an empty event to encoding/json, which the caller
		// refuses for its missing fields.
		return ev, nil, atEnd(dec)
	case tok.Kind() != '{':
		return nil, nil, fmt.Errorf("event is a JSON %s, not an object", tok.Kind())
	}
	var obj map[string]any
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, nil, err
		}
		name := tok.String() // the token is void after the next read
		var str *string
		switch name {
		case "cluster":
			str = &ev.Cluster
		case "apiVersion":
			str = &ev.APIVersion
		case "kind":
			str = &ev.Kind
		case "namespace":
			str = &ev.Namespace
		case "name":
			str = &ev.Name
		case "uid":
			str = &ev.UID
		case "resourceVersion":
			str = &ev.ResourceVersion
		case "type":
			str = &ev.Type
		case "labels":
			ev.Labels = nil
			err = jsonv2.UnmarshalDecode(dec, &ev.Labels, opts)
		case "time":
			err = jsonv2.UnmarshalDecode(dec, &ev.Time, opts)
		case "truncated":
			err = jsonv2.UnmarshalDecode(dec, &ev.Truncated, opts)
		case "object":
			ev.Object, obj, err = decodeObject(dec, data, opts, decode(ev.APIVersion, ev.Kind))
		default:
			err = dec.SkipValue()
		}
		if str != nil {
			err = readString(dec, str)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("event field %q: %w", name, err)
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, nil, err
	}
	return ev, obj, atEnd(dec)
}

// atEnd checks that nothing but space follows the event.
func atEnd(dec *jsontext.Decoder) error {
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return errors.New("event: data after its value")
	}
	return nil
}

// readString reads a string, leaving it unchanged for a null, as
// encoding/json does.
func readString(dec *jsontext.Decoder, s *string) error {
	tok, err := dec.ReadToken()
	switch {
	case err != nil:
		return err
	case tok.Kind() == 'n':
		return nil
	case tok.Kind() != '"':
		return fmt.Errorf("a JSON %s, not a string", tok.Kind())
	}
	*s = tok.String()
	return nil
}

// decodeObject reads the object field's value: its bytes as they are in
// data (copied, so that the event does not keep the message alive), and,
// when asked and the value is a JSON object, the decoded map from the same
// pass. A null is kept as the bytes "null", as json.RawMessage keeps it.
func decodeObject(dec *jsontext.Decoder, data []byte, opts jsonv2.Options, want bool) ([]byte, map[string]any, error) {
	start := dec.InputOffset()
	var obj map[string]any
	var err error
	if want && dec.PeekKind() == '{' {
		// By encoding/json's rules a value that does not fit its Go type
		// is passed over and the decoding goes on to the end, so the
		// decoder is then past the object, which is valid JSON: its
		// bytes are kept, its map is not.
		depth := dec.StackDepth()
		var mismatch *jsonv1.UnmarshalTypeError
		if err = jsonv2.UnmarshalDecode(dec, &obj, opts); errors.As(err, &mismatch) && dec.StackDepth() == depth {
			obj, err = nil, nil
		}
	} else {
		err = dec.SkipValue()
	}
	if err != nil {
		return nil, nil, err
	}
	// From the end of the field's name: the separator and any space
	// before the value, which no JSON value starts with.
	raw := bytes.TrimLeft(data[start:dec.InputOffset()], " \t\r\n:")
	return bytes.Clone(raw), obj, nil
}
