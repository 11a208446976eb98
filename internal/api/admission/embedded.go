package admission

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Embedded is an object that another object makes its cluster create:
// an item of a List, the manifest of an Argo resource template, or what a
// policy rule points at. It is checked by the same kind, scope and
// namespace rules as a top-level object.
type Embedded struct {
	// Path is where it is in the outer object.
	Path   string
	Object map[string]any
	// InString: the object is written as text (a YAML or JSON manifest),
	// which no field of the outer object can seal.
	InString bool
}

// EmbeddedRule says where a kind keeps objects it creates: field paths
// whose values are objects or manifests as text, `[]` stepping into each
// element of a list ("spec.resources[]", "spec.steps[].manifest").
type EmbeddedRule struct {
	Kind  string   `json:"kind"` // Kind.group, as the policy names kinds
	Paths []string `json:"paths"`
}

// argoWorkflowKinds keep a WorkflowSpec, at spec or spec.workflowSpec.
var argoWorkflowKinds = map[string]string{
	"Workflow": "spec", "WorkflowTemplate": "spec", "ClusterWorkflowTemplate": "spec", "CronWorkflow": "spec.workflowSpec",
}

// unsafeResourceFlags are kubectl flags of an Argo resource template
// (templates[].resource.flags, appended to `kubectl <action>`) that would
// point the action elsewhere than the manifest says: another namespace,
// every namespace, another cluster or identity.
var unsafeResourceFlags = []string{"-n", "--namespace", "-A", "--all-namespaces", "--kubeconfig", "--context",
	"--cluster", "--server", "-s", "--token", "--user", "--as", "--as-group", "--as-uid"}

// EmbeddedObjects finds the objects obj makes its cluster create: every
// item of a List (any kind named *List with items), every manifest of an
// Argo workflow's resource templates (templates[].resource.manifest), and
// the paths of rules whose kind is obj's. An error says why an embedded
// object cannot be checked (a manifest that does not parse, one read from
// an artifact, flags that point elsewhere), which refuses obj.
func EmbeddedObjects(obj map[string]any, rules []EmbeddedRule) ([]Embedded, error) {
	kind, _, _ := unstructured.NestedString(obj, "kind")
	apiVersion, _, _ := unstructured.NestedString(obj, "apiVersion")
	group := ""
	if g, _, ok := strings.Cut(apiVersion, "/"); ok {
		group = g
	}
	var out []Embedded
	add := func(path string, v any) error {
		e, err := embeddedAt(path, v)
		if err != nil {
			return err
		}
		if e != nil {
			out = append(out, *e)
		}
		return nil
	}
	if strings.HasSuffix(kind, "List") {
		items, _, _ := unstructured.NestedSlice(obj, "items")
		for i, it := range items {
			if err := add(fmt.Sprintf("items[%d]", i), it); err != nil {
				return nil, err
			}
		}
	}
	if at, ok := argoWorkflowKinds[kind]; ok && group == "argoproj.io" {
		templates, _, _ := unstructured.NestedSlice(obj, append(fields(at), "templates")...)
		for i, t := range templates {
			tm, _ := t.(map[string]any)
			res, ok, _ := unstructured.NestedMap(tm, "resource")
			if !ok {
				continue
			}
			path := fmt.Sprintf("%s.templates[%d].resource", at, i)
			if _, from := res["manifestFrom"]; from {
				return nil, fmt.Errorf("%s.manifestFrom: a manifest read from an artifact cannot be checked before it runs; write it in manifest", path)
			}
			flags, _, _ := unstructured.NestedStringSlice(res, "flags")
			for _, f := range flags {
				name, _, _ := strings.Cut(f, "=")
				if slices.Contains(unsafeResourceFlags, name) {
					return nil, fmt.Errorf("%s.flags: %q would point the action elsewhere than its manifest says; name the namespace in the manifest", path, f)
				}
			}
			if err := add(path+".manifest", res["manifest"]); err != nil {
				return nil, err
			}
		}
	}
	for _, r := range rules {
		if r.Kind != kindName(kind, group) {
			continue
		}
		for _, p := range r.Paths {
			vals, err := lookup(obj, p)
			if err != nil {
				return nil, err
			}
			for _, v := range vals {
				if err := add(v.path, v.value); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

// kindName is Kind.group, or Kind for the core group.
func kindName(kind, group string) string {
	if group == "" {
		return kind
	}
	return kind + "." + group
}

// embeddedAt reads one embedded object: a map, or a manifest as text.
func embeddedAt(path string, v any) (*Embedded, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return &Embedded{Path: path, Object: x}, nil
	case string:
		var m map[string]any
		if err := yaml.Unmarshal([]byte(x), &m); err != nil {
			return nil, fmt.Errorf("%s: the manifest does not parse, so what it creates cannot be checked: %w", path, err)
		}
		if m == nil {
			return nil, nil
		}
		return &Embedded{Path: path, Object: m, InString: true}, nil
	default:
		return nil, fmt.Errorf("%s: neither an object nor a manifest", path)
	}
}

type found struct {
	path  string
	value any
}

// lookup follows a rule's path through obj.
func lookup(obj map[string]any, path string) ([]found, error) {
	cur := []found{{value: obj}}
	for _, step := range strings.Split(path, ".") {
		each := strings.HasSuffix(step, "[]")
		name := strings.TrimSuffix(step, "[]")
		var next []found
		for _, c := range cur {
			m, ok := c.value.(map[string]any)
			if !ok {
				continue
			}
			v, ok := m[name]
			if !ok {
				continue
			}
			p := strings.TrimPrefix(c.path+"."+name, ".")
			if !each {
				next = append(next, found{p, v})
				continue
			}
			list, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("%s is not a list, as the policy's rule %q says", p, path)
			}
			for i, item := range list {
				next = append(next, found{fmt.Sprintf("%s[%d]", p, i), item})
			}
		}
		cur = next
	}
	return cur, nil
}
