package server

import "encoding/json"

// redacted stands for a value the audit log does not keep.
const redacted = "(redacted)"

// redactValues returns details, as JSON, with the values under every
// "data" and "stringData" key replaced, at any depth and whatever the
// kind: a Secret's are the obvious case, but a ConfigMap, a CRD that
// carries credentials, or a Secret nested in a list template holds them
// under the same names. The keys stay, so the log still says which
// entries a change touched. The audit log is read by every viewer of a
// namespace and kept forever; the objects themselves keep their values.
func redactValues(details any) (json.RawMessage, error) {
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
