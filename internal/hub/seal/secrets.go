package seal

import (
	"encoding/json"
	"fmt"
	"maps"
)

// Bindings: the associated data each sealed value is bound to, so that a
// value copied to another row cannot be opened there. Writers and readers
// (the API, the syncer) must agree on them, hence one place.

// KubeconfigBinding binds a cluster's kubeconfig.
func KubeconfigBinding(cluster string) string { return "cluster/" + cluster + "/kubeconfig" }

// SecretBinding binds the values of a Secret deployable.
func SecretBinding(namespace, name string) string { return "deployable/" + namespace + "/" + name }

// secretValueFields are the fields of a Secret that hold its values.
var secretValueFields = []string{"data", "stringData"}

// SplitSecret separates a Secret template into what may be stored in
// clear and the JSON of its values (data and stringData), to be sealed.
func SplitSecret(template map[string]any) (inClear map[string]any, values []byte, err error) {
	inClear = maps.Clone(template)
	v := map[string]any{}
	for _, f := range secretValueFields {
		if x, ok := inClear[f]; ok {
			v[f] = x
			delete(inClear, f)
		}
	}
	values, err = json.Marshal(v)
	return inClear, values, err
}

// JoinSecret puts opened values back into a clear Secret template; the
// result lives in memory only, for the apply to a cluster.
func JoinSecret(inClear map[string]any, values []byte) (map[string]any, error) {
	var v map[string]any
	if err := json.Unmarshal(values, &v); err != nil {
		return nil, fmt.Errorf("secret values: %w", err)
	}
	out := maps.Clone(inClear)
	for _, f := range secretValueFields {
		if x, ok := v[f]; ok {
			out[f] = x
		}
	}
	return out, nil
}

// overridesField holds, among a Secret deployable's sealed values, its
// overrides' patches: a patch of a Secret carries values as its template
// does (a merge patch's data, a JSON patch's value), so it is sealed with
// them, and what is stored in clear is its shape alone (RedactPatch).
const overridesField = "overrides"

// SealPatches adds patches (the overrides' patches of a Secret
// deployable, in order) to values as SplitSecret made them, for sealing.
func SealPatches(values []byte, patches []json.RawMessage) ([]byte, error) {
	if len(patches) == 0 {
		return values, nil
	}
	var v map[string]any
	if err := json.Unmarshal(values, &v); err != nil {
		return nil, fmt.Errorf("secret values: %w", err)
	}
	v[overridesField] = patches
	return json.Marshal(v)
}

// OpenPatches returns the overrides' patches sealed with values, nil when
// none were (values sealed before overrides were, or a Secret without
// overrides): the stored ones are then the real ones.
func OpenPatches(values []byte) ([]json.RawMessage, error) {
	var v struct {
		Overrides []json.RawMessage `json:"overrides"`
	}
	if err := json.Unmarshal(values, &v); err != nil {
		return nil, fmt.Errorf("secret values: %w", err)
	}
	return v.Overrides, nil
}

// Redacted stands for a value purser keeps only sealed.
const Redacted = "(redacted)"

// RedactPatch is a patch's shape without its values: a JSON patch keeps
// each operation's op, path and from, its value replaced; a merge patch
// keeps its keys and nulls (deletions), every other value replaced. It is
// what the stored spec, a GET and the history show of a Secret's
// override.
func RedactPatch(patch json.RawMessage) (json.RawMessage, error) {
	var v any
	if err := json.Unmarshal(patch, &v); err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case []any:
		for _, op := range x {
			if m, ok := op.(map[string]any); ok {
				if _, has := m["value"]; has {
					m["value"] = Redacted
				}
			}
		}
	case map[string]any:
		v = redactLeaves(x)
	}
	return json.Marshal(v)
}

func redactLeaves(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case map[string]any:
		for k, child := range x {
			x[k] = redactLeaves(child)
		}
		return x
	}
	return Redacted
}
