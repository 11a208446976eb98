package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

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
// changed.
func ApplyOverrides(tmpl map[string]any, os []Override, which []int) (map[string]any, error) {
	if len(which) == 0 {
		return tmpl, nil
	}
	doc, err := json.Marshal(tmpl)
	if err != nil {
		return nil, err
	}
	for _, i := range which {
		p := bytes.TrimSpace(os[i].Patch)
		switch {
		case len(p) > 0 && p[0] == '[':
			patch, err := jsonpatch.DecodePatch(p)
			if err != nil {
				return nil, fmt.Errorf("spec.overrides[%d].patch: %w", i, err)
			}
			if doc, err = patch.Apply(doc); err != nil {
				return nil, fmt.Errorf("spec.overrides[%d].patch: %w", i, err)
			}
		default:
			if doc, err = jsonpatch.MergePatch(doc, p); err != nil {
				return nil, fmt.Errorf("spec.overrides[%d].patch: %w", i, err)
			}
		}
	}
	var out map[string]any
	if err := json.Unmarshal(doc, &out); err != nil {
		return nil, err
	}
	return out, nil
}
