package kubeapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/purser-io/purser/internal/hub/store"
)

// member is one top-level field of a stored object, its value as stored.
type member struct {
	key string
	val []byte
}

// splitTop splits a JSON object into its top-level members without
// decoding their values: an object's data, spec and status are copied into
// the answer as they are (the ingester stored valid, compact JSON), and
// only its metadata is decoded. Decoding the whole object was most of the
// time of a list.
func splitTop(obj []byte) ([]member, error) {
	obj = bytes.TrimSpace(obj)
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return nil, errors.New("not a JSON object")
	}
	var out []member
	i := skipSpace(obj, 1)
	if obj[i] == '}' {
		return nil, nil
	}
	for {
		if obj[i] != '"' {
			return nil, fmt.Errorf("a key expected at byte %d", i)
		}
		end, err := skipString(obj, i)
		if err != nil {
			return nil, err
		}
		key := string(obj[i+1 : end-1])
		if bytes.IndexByte(obj[i:end], '\\') >= 0 {
			if err := json.Unmarshal(obj[i:end], &key); err != nil {
				return nil, err
			}
		}
		i = skipSpace(obj, end)
		if obj[i] != ':' {
			return nil, fmt.Errorf("':' expected at byte %d", i)
		}
		i = skipSpace(obj, i+1)
		vend, err := skipValue(obj, i)
		if err != nil {
			return nil, err
		}
		out = append(out, member{key: key, val: obj[i:vend]})
		i = skipSpace(obj, vend)
		switch obj[i] {
		case ',':
			i = skipSpace(obj, i+1)
		case '}':
			return out, nil
		default:
			return nil, fmt.Errorf("',' or '}' expected at byte %d", i)
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return min(i, len(b)-1)
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, errors.New("unterminated string")
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errors.New("unterminated value")
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' {
		j++
	}
	return j, nil
}

// servedMetadata is the record's metadata as the API serves it: its
// resourceVersion purser's (rv), its cluster and its own resourceVersion in
// annotations; and the rest of the object's members, as stored. The
// metadata's members are copied as stored too, but for those two.
func servedMetadata(r *store.InventoryRow, rv int64) ([]byte, []member, error) {
	var top []member
	if len(r.Object) > 0 {
		var err error
		if top, err = splitTop(r.Object); err != nil {
			return nil, nil, fmt.Errorf("object %s/%s of %s: %w", r.Namespace, r.Name, r.Cluster, err)
		}
	}
	var mdMembers []member
	rest := top[:0:0]
	for _, m := range top {
		switch m.key {
		case "metadata":
			var err error
			if mdMembers, err = splitTop(m.val); err != nil {
				return nil, nil, fmt.Errorf("metadata of %s/%s of %s: %w", r.Namespace, r.Name, r.Cluster, err)
			}
		case "apiVersion", "kind":
		case "data", "stringData":
			// A Secret's data is never served (nor stored: this says so
			// twice).
			if r.APIVersion == "v1" && r.Kind == "Secret" {
				continue
			}
			rest = append(rest, m)
		default:
			rest = append(rest, m)
		}
	}
	ours := appendQuoted(nil, ClusterAnnotation)
	ours = append(ours, ':')
	ours = appendQuoted(ours, r.Cluster)
	ours = append(ours, ',')
	ours = appendQuoted(ours, ClusterResourceVersionAnnotation)
	ours = append(ours, ':')
	ours = appendQuoted(ours, r.ResourceVersion)
	b := make([]byte, 0, 256)
	b = append(b, '{')
	seen := map[string]bool{}
	add := func(key string, val []byte) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = appendQuoted(b, key)
		b = append(b, ':')
		b = append(b, val...)
		seen[key] = true
	}
	for _, m := range mdMembers {
		switch m.key {
		case "resourceVersion", "name", "uid", "namespace", "labels":
			continue // from the record, below
		case "annotations":
			ann := map[string]string{}
			if json.Unmarshal(m.val, &ann) != nil {
				ann = map[string]string{}
			}
			delete(ann, ClusterAnnotation)
			delete(ann, ClusterResourceVersionAnnotation)
			v := append([]byte{'{'}, ours...)
			if len(ann) > 0 {
				others, _ := json.Marshal(ann)
				v = append(v, ',')
				v = append(v, others[1:]...)
			} else {
				v = append(v, '}')
			}
			add("annotations", v)
		default:
			add(m.key, m.val)
		}
	}
	if !seen["annotations"] {
		add("annotations", append(append([]byte{'{'}, ours...), '}'))
	}
	add("name", appendQuoted(nil, r.Name))
	if r.Namespace != "" {
		add("namespace", appendQuoted(nil, r.Namespace))
	}
	add("uid", appendQuoted(nil, r.UID))
	add("resourceVersion", append(strconv.AppendInt([]byte{'"'}, rv, 10), '"'))
	if len(r.Labels) > 0 {
		lb, _ := json.Marshal(r.Labels)
		add("labels", lb)
	}
	if !seen["creationTimestamp"] {
		add("creationTimestamp", appendQuoted(nil, r.ObservedAt.UTC().Format(time.RFC3339)))
	}
	return append(b, '}'), rest, nil
}

// appendQuoted appends s as a JSON string: plain ASCII as it is, anything
// else through encoding/json.
func appendQuoted(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendObject appends the record's object as the API serves it
// (servedMetadata): apiVersion, kind, metadata, then the other members as
// stored, in their order.
func appendObject(b []byte, r *store.InventoryRow, rv int64) ([]byte, error) {
	md, rest, err := servedMetadata(r, rv)
	if err != nil {
		return nil, err
	}
	b = append(b, `{"apiVersion":`...)
	b = appendQuoted(b, r.APIVersion)
	b = append(b, `,"kind":`...)
	b = appendQuoted(b, r.Kind)
	b = append(b, `,"metadata":`...)
	b = append(b, md...)
	for _, m := range rest {
		b = append(b, ',')
		b = appendQuoted(b, m.key)
		b = append(b, ':')
		b = append(b, m.val...)
	}
	return append(b, '}'), nil
}
