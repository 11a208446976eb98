package submission

import (
	"encoding/json"
	"strings"
)

// redacted stands for a value the audit log does not keep.
const redacted = "(redacted)"

// Redact returns details, as JSON, with the values under every
// "data" and "stringData" key replaced, at any depth and whatever the
// kind: a Secret's are the obvious case, but a ConfigMap, a CRD that
// carries credentials, or a Secret nested in a list template holds them
// under the same names. The keys stay, so the log still says which
// entries a change touched. The audit log is read by every viewer of a
// namespace and kept forever; the objects themselves keep their values.
// An operation of a JSON patch (an override) that writes under data or
// stringData has its value replaced too: there the values are not under
// those keys but in the operation's "value". (A Secret's overrides never
// reach here in clear: they are sealed with its values.)
func Redact(details any) (json.RawMessage, error) {
	data, err := json.Marshal(details)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return json.Marshal(redactWalk(v))
}

func redactWalk(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if path, ok := x["path"].(string); ok && x["op"] != nil && writesValues(path) {
			if _, has := x["value"]; has {
				x["value"] = redacted
			}
		}
		for k, child := range x {
			if k == "data" || k == "stringData" {
				x[k] = redactEntries(child)
				continue
			}
			x[k] = redactWalk(child)
		}
	case []any:
		for i, child := range x {
			x[i] = redactWalk(child)
		}
	}
	return v
}

// writesValues reports whether a JSON patch path (RFC 6901) is data or
// stringData, or below them.
func writesValues(path string) bool {
	for _, f := range []string{"/data", "/stringData"} {
		if path == f || strings.HasPrefix(path, f+"/") {
			return true
		}
	}
	return false
}

// redactEntries keeps a map's keys and drops every value.
func redactEntries(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return redacted
	}
	out := make(map[string]any, len(m))
	for k := range m {
		out[k] = redacted
	}
	return out
}
