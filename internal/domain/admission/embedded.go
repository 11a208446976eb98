package admission

import (
	"fmt"
	"strings"

	"github.com/purser-io/purser/internal/domain/kinds"
)

// Embedded is an object that another object makes its cluster create:
// an item of a List, a document of the manifest of an Argo resource
// template, or what a policy rule points at. It is checked by the same
// kind, scope and namespace rules as a top-level object.
type Embedded = kinds.Nested

// EmbeddedRule says where a kind keeps objects it creates: field paths
// whose values are objects or manifests as text, `[]` stepping into each
// element of a list ("spec.resources[]", "spec.steps[].manifest").
type EmbeddedRule struct {
	Kind  string   `json:"kind"` // Kind.group, as the policy names kinds
	Paths []string `json:"paths"`
}

// EmbeddedObjects finds the objects obj makes its cluster create: what
// its kind's driver says (every item of a List, every document of the
// manifest of each of an Argo workflow's resource templates, in the
// namespace its kubectl flags name), and the paths of rules whose kind is
// obj's. An error says why an embedded object cannot be checked (a
// manifest that does not parse, one read from an artifact, flags that
// cannot be judged), which refuses obj.
func EmbeddedObjects(obj map[string]any, rules []EmbeddedRule) ([]Embedded, error) {
	out, err := kinds.Default().Nested(obj)
	if err != nil {
		return nil, err
	}
	gk := kinds.GroupKindOf(obj)
	for _, r := range rules {
		if r.Kind != kindName(gk.Kind, gk.Group) {
			continue
		}
		for _, p := range r.Paths {
			vals, err := lookup(obj, p)
			if err != nil {
				return nil, err
			}
			for _, v := range vals {
				found, err := kinds.NestedAt(v.path, v.value)
				if err != nil {
					return nil, err
				}
				out = append(out, found...)
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
