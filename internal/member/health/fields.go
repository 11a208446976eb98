package health

import "github.com/purser-io/purser/internal/platform/fields"

// The objects judged here come from clusters, files and fuzzers: every
// read goes through internal/platform/fields, which treats anything
// unexpected as absent, so that the interpreters judge from what is
// missing rather than crash.

// count is fields.Int with absent read as zero, as Kubernetes omits zero
// counts from status.
func count(obj map[string]any, path ...string) int64 {
	n, _ := fields.Int(obj, path...)
	return n
}

// condition is one entry of status.conditions.
type condition struct {
	status, reason, message string
}

// findCondition returns the condition of type typ in obj's status.
func findCondition(obj map[string]any, typ string) (condition, bool) {
	v, _ := fields.Get(obj, "status", "conditions")
	list, _ := v.([]any)
	for _, item := range list {
		c, ok := item.(map[string]any)
		if !ok || fields.String(c, "type") != typ {
			continue
		}
		return condition{status: fields.String(c, "status"), reason: fields.String(c, "reason"), message: fields.String(c, "message")}, true
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
