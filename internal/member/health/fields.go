package health

import (
	"encoding/json"
	"math"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The objects judged here come from clusters, files and fuzzers, so every
// read checks the type it finds and treats anything unexpected as absent;
// the interpreters then judge from what is missing rather than crash.

// get walks obj along path through nested maps; a step that is not a map
// is absent, as a missing one.
func get(obj map[string]any, path ...string) (any, bool) {
	v, found, err := unstructured.NestedFieldNoCopy(obj, path...)
	return v, found && err == nil
}

// str is the string at path, or "" when it is absent or not a string.
func str(obj map[string]any, path ...string) string {
	v, _ := get(obj, path...)
	s, _ := v.(string)
	return s
}

// boolean is the bool at path, false when absent.
func boolean(obj map[string]any, path ...string) bool {
	v, _ := get(obj, path...)
	b, _ := v.(bool)
	return b
}

// integer reads a count at path. Decoded JSON holds int64 (apimachinery's
// decoder) or float64 (encoding/json), and hand-built maps hold int; all
// are accepted, and ok is false for anything else or a fraction.
func integer(obj map[string]any, path ...string) (n int64, ok bool) {
	v, _ := get(obj, path...)
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

// count is integer with absent read as zero, as Kubernetes omits zero
// counts from status.
func count(obj map[string]any, path ...string) int64 {
	n, _ := integer(obj, path...)
	return n
}

// condition is one entry of status.conditions.
type condition struct {
	status, reason, message string
}

// findCondition returns the condition of type typ in obj's status.
func findCondition(obj map[string]any, typ string) (condition, bool) {
	v, _ := get(obj, "status", "conditions")
	list, _ := v.([]any)
	for _, item := range list {
		c, ok := item.(map[string]any)
		if !ok || str(c, "type") != typ {
			continue
		}
		return condition{status: str(c, "status"), reason: str(c, "reason"), message: str(c, "message")}, true
	}
	return condition{}, false
}

// isTrue reports whether the condition of type typ is "True".
func isTrue(obj map[string]any, typ string) (condition, bool) {
	c, ok := findCondition(obj, typ)
	return c, ok && c.status == "True"
}

// describe renders a condition as "Reason: message", whichever exist.
func (c condition) describe() string {
	switch {
	case c.reason != "" && c.message != "":
		return c.reason + ": " + c.message
	case c.reason != "":
		return c.reason
	}
	return c.message
}
