package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// MaxRenderedBytes bounds an object as purser renders it for a member
// cluster (its template with overrides or mutations applied): etcd's
// default request limit, past which no member cluster could store it
// anyway. It also bounds what a JSON patch's copy operations may add, so
// that a patch of a few kilobytes cannot build gigabytes in the hub
// (each copy of a document into itself doubles it).
const MaxRenderedBytes = 3 << 19 // 1.5 MiB

// IdentityFields are what an override may not change: which object the
// template is. An override that turned a ConfigMap into a Secret would
// carry values the API never sealed, and one that renamed the object or
// moved it to another namespace would write where the placement and the
// policy did not look.
var IdentityFields = [][]string{{"apiVersion"}, {"kind"}, {"metadata", "name"}, {"metadata", "namespace"}}

// ErrTooLarge is wrapped by rendering errors that come from the bounds
// (MaxRenderedBytes), as opposed to a patch that does not apply.
var ErrTooLarge = errors.New("too large as rendered")

// ErrIdentity is wrapped by the error of an override that changes one of
// IdentityFields.
var ErrIdentity = errors.New("an override may not change which object the template is")

// OverridesFor returns the indices of the overrides whose clusterSelector
// matches a cluster's labels (an override without one matches every
// cluster), in order.
func OverridesFor(os []Override, clusterLabels map[string]string) []int {
	var out []int
	for i, o := range os {
		if o.ClusterSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(o.ClusterSelector)
			if err != nil || !sel.Matches(labels.Set(clusterLabels)) {
				continue
			}
		}
		out = append(out, i)
	}
	return out
}

// ApplyOverrides returns tmpl with the overrides named by which applied in
// order: a patch that is a JSON object is a JSON merge patch (RFC 7386),
// a list a JSON patch (RFC 6902), both through evanphx/json-patch, the
// library Kubernetes' own apply and kubectl patch use. tmpl is not
// changed. Errors name the override; they never quote a value.
//
// Every step is bounded: a JSON patch's copies may add no more than
// MaxRenderedBytes (the library's accumulated-copy limit, checked as it
// copies), the document after each override may not exceed it, and no
// override may change IdentityFields.
func ApplyOverrides(tmpl map[string]any, os []Override, which []int) (map[string]any, error) {
	if len(which) == 0 {
		return tmpl, nil
	}
	doc, err := json.Marshal(tmpl)
	if err != nil {
		return nil, err
	}
	opts := jsonpatch.NewApplyOptions()
	opts.AccumulatedCopySizeLimit = MaxRenderedBytes
	for n, i := range which {
		p := bytes.TrimSpace(os[i].Patch)
		switch {
		case len(p) > 0 && p[0] == '[':
			patch, err := jsonpatch.DecodePatch(p)
			if err != nil {
				return nil, fmt.Errorf("spec.overrides[%d].patch: %w", i, err)
			}
			if doc, err = patch.ApplyWithOptions(doc, opts); err != nil {
				var copyErr *jsonpatch.AccumulatedCopySizeError
				if errors.As(err, &copyErr) {
					return nil, fmt.Errorf("spec.overrides[%d].patch: %w: its copy operations would add more than %d bytes to the object", i, ErrTooLarge, MaxRenderedBytes)
				}
				return nil, fmt.Errorf("spec.overrides[%d].patch: %w", i, err)
			}
		default:
			if doc, err = jsonpatch.MergePatch(doc, p); err != nil {
				return nil, fmt.Errorf("spec.overrides[%d].patch: %w", i, err)
			}
		}
		if len(doc) > MaxRenderedBytes {
			return nil, fmt.Errorf("spec.overrides[%d].patch: %w: it makes the object %d bytes, over the %d bytes a rendered object may have", i, ErrTooLarge, len(doc), MaxRenderedBytes)
		}
		// Checked after each override, so that the one to blame is named
		// (a later one could put the field back).
		var out map[string]any
		if err := json.Unmarshal(doc, &out); err != nil {
			return nil, fmt.Errorf("spec.overrides[%d].patch: %w", i, err)
		}
		if f := changedIdentity(tmpl, out); f != "" {
			return nil, fmt.Errorf("spec.overrides[%d].patch changes %s: %w (apiVersion, kind, metadata.name and metadata.namespace stay as the template says; declare another deployable instead)", i, f, ErrIdentity)
		}
		if n == len(which)-1 {
			return out, nil
		}
	}
	panic("unreachable") // which is not empty
}

// changedIdentity names the first of IdentityFields that differs between
// before and after, or "".
func changedIdentity(before, after map[string]any) string {
	for _, path := range IdentityFields {
		if b, a := fieldAt(before, path), fieldAt(after, path); a != b {
			out := path[0]
			for _, p := range path[1:] {
				out += "." + p
			}
			return out
		}
	}
	return ""
}

// fieldAt is the value at path as text ("" when missing), so that a
// string and anything else that replaced it compare unequal.
func fieldAt(obj map[string]any, path []string) string {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[p]
	}
	if cur == nil {
		return ""
	}
	if s, ok := cur.(string); ok {
		return "s:" + s
	}
	b, _ := json.Marshal(cur)
	return "j:" + string(b)
}

// Rendering is one object a writer may apply, foreseen at accept, and
// what made it differ from the template.
type Rendering struct {
	// Cause names the override or mutation, or the set of them
	// ("spec.overrides[0] with spec.overrides[2]").
	Cause  string
	Object map[string]any
}

// OverrideRenderings returns the template as each override alone renders
// it, as all of them together do, and as the overrides each of clusters
// (their labels) selects do: what the API reviews at accept, so that an
// override that would make a cluster run what the template may not is
// refused before it is stored. The error is of what no cluster may get
// (ErrTooLarge, ErrIdentity). A set that does not apply together (one
// override removes what another patches) is left out: selectors may keep
// them apart, and the syncer reviews what a cluster really gets.
func OverrideRenderings(tmpl map[string]any, os []Override, clusters []map[string]string) ([]Rendering, error) {
	var sets [][]int
	for i := range os {
		sets = append(sets, []int{i})
	}
	if len(os) > 1 {
		all := make([]int, len(os))
		for i := range all {
			all[i] = i
		}
		sets = append(sets, all)
	}
	for _, labels := range clusters {
		if which := OverridesFor(os, labels); len(which) > 1 {
			sets = append(sets, which)
		}
	}
	seen := map[string]bool{}
	var out []Rendering
	for _, which := range sets {
		cause := overridesCause(which)
		if seen[cause] {
			continue
		}
		seen[cause] = true
		obj, err := ApplyOverrides(tmpl, os, which)
		switch {
		case errors.Is(err, ErrTooLarge), errors.Is(err, ErrIdentity):
			return nil, err
		case err != nil:
			continue // validation names a single override that does not apply
		}
		out = append(out, Rendering{Cause: cause, Object: obj})
	}
	return out, nil
}

// overridesCause names a set of overrides.
func overridesCause(which []int) string {
	var b bytes.Buffer
	for n, i := range which {
		if n > 0 {
			b.WriteString(" with ")
		}
		fmt.Fprintf(&b, "spec.overrides[%d]", i)
	}
	return b.String()
}
