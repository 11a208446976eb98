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
