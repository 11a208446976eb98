package kubeapi

import (
	"encoding/json"
	"strings"

	"sigs.k8s.io/yaml"
)

// CRD is the CustomResourceDefinition of one of purser's kinds, as YAML,
// made from the same schema /k8s serves and server-side apply merges by,
// for tools that want purser's kinds declared in a cluster (a GitOps
// tool's dry runs, an editor's validation). Purser itself serves the
// kinds; a cluster that installs these stores its own copies, which
// purser never reads.
func CRD(k *OwnKind) ([]byte, error) {
	s := kindSchema(k)
	// A CRD's schema says nothing of metadata but that it is an object,
	// and names no group-version-kind: the CRD does.
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		return nil, err
	}
	delete(schema, extGVK)
	delete(schema, extMapType) // the root of a CRD's schema is always granular, and may not say so
	props, _ := schema["properties"].(map[string]any)
	if props != nil {
		props["metadata"] = map[string]any{"type": "object"}
	}
	scope := "Cluster"
	if k.Namespaced {
		scope = "Namespaced"
	}
	names := map[string]any{"kind": k.Kind, "listKind": k.Kind + "List", "plural": k.Plural, "singular": k.Singular}
	if len(k.ShortNames) > 0 {
		names["shortNames"] = k.ShortNames
	}
	var columns []map[string]any
	for _, c := range k.Columns {
		col := map[string]any{"name": c.Name, "type": c.Type, "jsonPath": "." + strings.Join(c.Path, "."), "description": c.Description}
		if c.Priority != 0 {
			col["priority"] = c.Priority
		}
		columns = append(columns, col)
	}
	columns = append(columns, map[string]any{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
	crd := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": k.Plural + "." + OwnGroup},
		"spec": map[string]any{
			"group": OwnGroup, "names": names, "scope": scope,
			"versions": []any{map[string]any{
				"name": OwnVersion, "served": true, "storage": true,
				"subresources":             map[string]any{"status": map[string]any{}},
				"additionalPrinterColumns": columns,
				"schema":                   map[string]any{"openAPIV3Schema": schema},
			}},
		},
	}
	return yaml.Marshal(crd)
}
