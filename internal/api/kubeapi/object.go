package kubeapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
		var key string
		if err := json.Unmarshal(obj[i:end], &key); err != nil {
			return nil, err
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
// annotations; the rest of the object's members beside it.
func servedMetadata(r *store.InventoryRow, rv int64) (map[string]json.RawMessage, []member, error) {
	var top []member
	if len(r.Object) > 0 {
		var err error
		if top, err = splitTop(r.Object); err != nil {
			return nil, nil, fmt.Errorf("object %s/%s of %s: %w", r.Namespace, r.Name, r.Cluster, err)
		}
	}
	md := map[string]json.RawMessage{}
	rest := top[:0:0]
	for _, m := range top {
		switch m.key {
		case "metadata":
			if err := json.Unmarshal(m.val, &md); err != nil {
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
	ann := map[string]string{}
	if raw, ok := md["annotations"]; ok {
		_ = json.Unmarshal(raw, &ann)
	}
	ann[ClusterAnnotation] = r.Cluster
	ann[ClusterResourceVersionAnnotation] = r.ResourceVersion
	md["annotations"], _ = json.Marshal(ann)
	md["resourceVersion"] = json.RawMessage(`"` + strconv.FormatInt(rv, 10) + `"`)
	md["name"], _ = json.Marshal(r.Name)
	md["uid"], _ = json.Marshal(r.UID)
	if r.Namespace != "" {
		md["namespace"], _ = json.Marshal(r.Namespace)
	}
	if len(r.Labels) > 0 {
		md["labels"], _ = json.Marshal(r.Labels)
	}
	if _, ok := md["creationTimestamp"]; !ok {
		md["creationTimestamp"], _ = json.Marshal(r.ObservedAt.UTC().Format(time.RFC3339))
	}
	return md, rest, nil
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
	b = strconv.AppendQuote(b, r.APIVersion)
	b = append(b, `,"kind":`...)
	b = strconv.AppendQuote(b, r.Kind)
	b = append(b, `,"metadata":`...)
	b = appendSorted(b, md)
	for _, m := range rest {
		b = append(b, ',')
		kb, _ := json.Marshal(m.key)
		b = append(b, kb...)
		b = append(b, ':')
		b = append(b, m.val...)
	}
	return append(b, '}'), nil
}

func appendSorted(b []byte, m map[string]json.RawMessage) []byte {
	b = append(b, '{')
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b = append(b, ',')
		}
		kb, _ := json.Marshal(k)
		b = append(b, kb...)
		b = append(b, ':')
		b = append(b, m[k]...)
	}
	return append(b, '}')
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
