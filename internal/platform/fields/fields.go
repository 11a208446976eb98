// Package fields reads decoded Kubernetes objects (map[string]any, as
// JSON or YAML decodes them) leniently. The objects purser reads come
// from clusters, files and fuzzers, so every read checks the type it
// finds and treats anything unexpected as absent: a judgement made from
// what is missing is better than a crash.
package fields

import (
	"encoding/json"
	"math"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Get is the value at path; false when a step is absent or not a map.
func Get(obj map[string]any, path ...string) (any, bool) {
	v, ok, err := unstructured.NestedFieldNoCopy(obj, path...)
	return v, ok && err == nil
}

// String is the string at path, or "" when it is absent or not a string.
func String(obj map[string]any, path ...string) string {
	v, _ := Get(obj, path...)
	s, _ := v.(string)
	return s
}

// Bool is the bool at path, false when absent.
func Bool(obj map[string]any, path ...string) bool {
	v, _ := Get(obj, path...)
	b, _ := v.(bool)
	return b
}

// Int reads a count at path. Decoded JSON holds int64 (apimachinery's
// decoder), float64 (encoding/json) or json.Number, and hand-built maps
// hold int; all are accepted, and ok is false for anything else or a
// fraction.
func Int(obj map[string]any, path ...string) (n int64, ok bool) {
	v, _ := Get(obj, path...)
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, false
		}
		return int64(x), true
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// StringMap is v as a map of strings (labels, annotations), keeping only
// the values that are strings; nil when v is not a map.
func StringMap(v any) map[string]string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		if s, ok := x.(string); ok {
			out[k] = s
		}
	}
	return out
}
