package stream

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// decodeJobs asks for the objects of Jobs only, as the ingester asks for
// those of the kinds its health interpreter judges from the object.
func decodeJobs(_, kind string) bool { return kind == "Job" }

// asEncodingJSON is what encoding/json makes of data as an Event, and of
// its object when decodeJobs asks for it: what DecodeEvent must agree
// with. ok is false when encoding/json refuses the event.
func asEncodingJSON(data []byte) (ev *Event, obj map[string]any, ok bool) {
	ev = &Event{}
	if json.Unmarshal(data, ev) != nil {
		return nil, nil, false
	}
	if decodeJobs(ev.APIVersion, ev.Kind) && bytes.HasPrefix(ev.Object, []byte("{")) {
		if json.Unmarshal(ev.Object, &obj) != nil {
			obj = nil // it does not decode
		}
	}
	return ev, obj, true
}

// sameEvent compares two events field by field; the object's bytes
// compare as bytes.
func sameEvent(t *testing.T, data []byte, got, want *Event) {
	t.Helper()
	g, w := *got, *want
	if !bytes.Equal(g.Object, w.Object) {
		t.Errorf("%s: object bytes %q, encoding/json %q", data, g.Object, w.Object)
	}
	g.Object, w.Object = nil, nil
	if !g.Time.Equal(w.Time) {
		t.Errorf("%s: time %v, encoding/json %v", data, g.Time, w.Time)
	}
	g.Time, w.Time = time.Time{}, time.Time{}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %+v\nwant %+v", data, g, w)
	}
}

var decodeCases = []string{
	// As an agent writes them.
	`{"cluster":"c1","apiVersion":"batch/v1","kind":"Job","namespace":"team-a","name":"j","uid":"u1","resourceVersion":"7","type":"MODIFIED","labels":{"app":"x"},"time":"2026-12-07T10:00:00.123456789Z","object":{"apiVersion":"batch/v1","kind":"Job","status":{"succeeded":1}}}`,
	`{"cluster":"c1","apiVersion":"v1","kind":"ConfigMap","name":"cm","uid":"u2","resourceVersion":"8","type":"ADDED","time":"2026-12-07T10:00:00Z","object":{"data":{"k":"v"}}}`,
	`{"cluster":"c1","apiVersion":"batch/v1","kind":"Job","name":"j","uid":"u3","resourceVersion":"9","type":"DELETED","time":"2026-12-07T10:00:00Z","truncated":true}`,
	// Spaces, nulls, unknown fields, a null object.
	"{ \"kind\" : \"Job\" , \"uid\":\"u\", \"labels\": null, \"namespace\": null, \"extra\": [1, {\"a\": 2}], \"object\" :\n {\"a\" : 1} }",
	`{"kind":"Job","uid":"u","object":null}`,
	`{"kind":"Job","uid":"u","object":[1,2]}`,
	// A name given twice: the last wins, in the event and in its object,
	// whole (never merged), as PostgreSQL's jsonb keeps it.
	`{"kind":"Job","uid":"first","uid":"second","object":{"status":{"a":1},"status":{"b":2}}}`,
	// The object before the kind: bytes only, the caller decodes.
	`{"object":{"status":{"succeeded":1}},"apiVersion":"batch/v1","kind":"Job","uid":"u"}`,
	// Valid JSON that does not decode into a map of float64s.
	`{"kind":"Job","uid":"u","object":{"n":1e400,"m":[true]}}`,
	// Invalid UTF-8 in a string and in the object.
	"{\"kind\":\"Job\",\"name\":\"\xff\",\"uid\":\"u\",\"object\":{\"s\":\"\xfe\"}}",
}

// TestDecodeEventAsEncodingJSON: DecodeEvent reads what encoding/json
// reads, its object map included, and refuses what it refuses.
func TestDecodeEventAsEncodingJSON(t *testing.T) {
	for _, c := range decodeCases {
		checkDecode(t, []byte(c))
	}
	for _, bad := range []string{
		``, `[]`, `"x"`, `{"kind":1}`, `{"kind":"Job"} {}`, `{"kind":"Job","object":{"a":}}`,
		`{"kind":"Job","labels":{"a":1}}`, `{"kind":"Job","time":"yesterday"}`, `{"kind":"Job"`,
	} {
		if _, _, err := DecodeEvent([]byte(bad), decodeJobs); err == nil {
			t.Errorf("%q: decoded, encoding/json refuses it", bad)
		}
		if _, _, ok := asEncodingJSON([]byte(bad)); ok {
			t.Errorf("%q: encoding/json reads it: the case is wrong", bad)
		}
	}
	// The object is decoded only when asked.
	ev, obj, err := DecodeEvent([]byte(decodeCases[1]), decodeJobs)
	if err != nil || obj != nil || string(ev.Object) != `{"data":{"k":"v"}}` {
		t.Errorf("a ConfigMap's object: %v %v %q", err, obj, ev.Object)
	}
}

func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	want, wantObj, ok := asEncodingJSON(data)
	got, gotObj, err := DecodeEvent(data, decodeJobs)
	switch {
	case caseVariant(data):
		// encoding/json matches field names without regard to case,
		// which DecodeEvent does not: the one difference allowed.
		return
	case !ok && err == nil:
		t.Errorf("%q: decoded, encoding/json refuses it", data)
		return
	case ok && err != nil:
		t.Errorf("%q: %v, encoding/json reads it", data, err)
		return
	case !ok:
		return
	}
	sameEvent(t, data, got, want)
	if gotObj != nil && !reflect.DeepEqual(gotObj, wantObj) {
		t.Errorf("%s: object %#v, encoding/json %#v", data, gotObj, wantObj)
	}
	if gotObj == nil && wantObj != nil && bytes.Index(data, []byte(`"object"`)) > bytes.Index(data, []byte(`"kind"`)) {
		t.Errorf("%s: object not decoded, though asked for and decodable", data)
	}
}

// caseVariant reports whether data names a field of Event in another
// case ("Kind"), which only encoding/json takes for it.
func caseVariant(data []byte) bool {
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) != nil {
		return false
	}
	for name := range fields {
		for _, f := range []string{"cluster", "apiVersion", "kind", "namespace", "name", "uid", "resourceVersion", "type", "labels", "time", "object", "truncated"} {
			if name != f && strings.EqualFold(name, f) {
				return true
			}
		}
	}
	return false
}

// FuzzDecodeEvent: on any input, DecodeEvent agrees with encoding/json.
func FuzzDecodeEvent(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
	})
}
