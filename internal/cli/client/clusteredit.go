package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/purser-io/purser/api/v1alpha1"
)

// EditCluster reads a cluster, lets edit change its labels and taints, and
// puts it back without a kubeconfig unless edit set one (the server keeps
// the stored one) and
// with the resourceVersion it read, so that a change made meanwhile (the
// console's cordon, another user) makes the server answer 409 instead of
// being overwritten; the edit is then made again on the new state. edit
// returns false when there is nothing to change, and nothing is sent.
func (c *Client) EditCluster(ctx context.Context, name string, edit func(cl *v1alpha1.Cluster) (bool, error)) (*v1alpha1.Cluster, bool, error) {
	r, _ := ResourceOfKind(v1alpha1.KindCluster)
	for attempt := 0; ; attempt++ {
		var cl v1alpha1.Cluster
		if _, err := c.Do(ctx, http.MethodGet, r.Path("", name), nil, nil, "", &cl); err != nil {
			return nil, false, err
		}
		changed, err := edit(&cl)
		if err != nil || !changed {
			return &cl, false, err
		}
		body, err := json.Marshal(v1alpha1.Cluster{
			TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindCluster},
			Metadata: v1alpha1.ObjectMeta{Name: cl.Metadata.Name, Labels: cl.Metadata.Labels, Annotations: cl.Metadata.Annotations,
				ResourceVersion: cl.Metadata.ResourceVersion},
			// The API never returns the kubeconfig: it is sent only when
			// edit set one.
			Spec: v1alpha1.ClusterSpec{Taints: cl.Spec.Taints, Kubeconfig: cl.Spec.Kubeconfig, Inventory: cl.Spec.Inventory},
		})
		if err != nil {
			return nil, false, err
		}
		var out v1alpha1.Cluster
		_, err = c.Do(ctx, http.MethodPut, r.Path("", name), nil, body, "application/json", &out)
		if IsConflict(err) && attempt < 4 {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		return &out, true, nil
	}
}

// LabelEdit is what `purser label` was asked: labels to set and keys to
// remove, as kubectl label takes them (k=v, k-).
type LabelEdit struct {
	Set       map[string]string
	Remove    []string
	Overwrite bool
}

// ParseLabelEdit reads k=v and k- arguments.
func ParseLabelEdit(args []string, overwrite bool) (LabelEdit, error) {
	e := LabelEdit{Set: map[string]string{}, Overwrite: overwrite}
	for _, a := range args {
		if k, ok := strings.CutSuffix(a, "-"); ok && !strings.Contains(a, "=") {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				return e, fmt.Errorf("invalid label key %q: %s", k, strings.Join(errs, "; "))
			}
			e.Remove = append(e.Remove, k)
			continue
		}
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return e, fmt.Errorf("%q is neither key=value (set) nor key- (remove)", a)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return e, fmt.Errorf("invalid label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return e, fmt.Errorf("invalid label value %q: %s", v, strings.Join(errs, "; "))
		}
		if _, dup := e.Set[k]; dup || slices.Contains(e.Remove, k) {
			return e, fmt.Errorf("label %s is given twice", k)
		}
		e.Set[k] = v
	}
	if len(e.Set) == 0 && len(e.Remove) == 0 {
		return e, fmt.Errorf("say which labels: key=value to set, key- to remove")
	}
	return e, nil
}

// Apply changes labels; it reports whether anything changed. As kubectl
// label, it refuses to change a label's value without Overwrite, and to
// remove a label that is not there.
func (e LabelEdit) Apply(labels map[string]string) (map[string]string, bool, error) {
	out := map[string]string{}
	for k, v := range labels {
		out[k] = v
	}
	changed := false
	for k, v := range e.Set {
		old, had := out[k]
		if had && old != v && !e.Overwrite {
			return labels, false, fmt.Errorf("label %s is already %q; add --overwrite to change it", k, old)
		}
		changed = changed || !had || old != v
		out[k] = v
	}
	for _, k := range e.Remove {
		if _, had := out[k]; !had {
			return labels, false, fmt.Errorf("there is no label %s to remove", k)
		}
		delete(out, k)
		changed = true
	}
	return out, changed, nil
}

// TaintEdit is what `purser taint` was asked, in kubectl taint's syntax:
// key=value:Effect or key:Effect to add, key:Effect- or key- to remove
// (k8s.io/kubectl/pkg/cmd/taint/utils.go, parseTaints).
type TaintEdit struct {
	Add       []corev1.Taint
	Remove    []corev1.Taint // an empty Effect removes every effect of the key
	Overwrite bool
}

// ParseTaintEdit reads taint arguments.
func ParseTaintEdit(args []string, overwrite bool) (TaintEdit, error) {
	e := TaintEdit{Overwrite: overwrite}
	for _, a := range args {
		if spec, ok := strings.CutSuffix(a, "-"); ok {
			t, err := parseTaint(spec)
			if err != nil {
				return e, err
			}
			e.Remove = append(e.Remove, corev1.Taint{Key: t.Key, Effect: t.Effect})
			continue
		}
		t, err := parseTaint(a)
		if err != nil {
			return e, err
		}
		if t.Effect == "" {
			return e, fmt.Errorf("taint %q has no effect: write key=value:Effect, with NoSchedule, PreferNoSchedule or NoExecute", a)
		}
		if slices.ContainsFunc(e.Add, func(o corev1.Taint) bool { return o.MatchTaint(&t) }) {
			return e, fmt.Errorf("taint %s:%s is given twice", t.Key, t.Effect)
		}
		e.Add = append(e.Add, t)
	}
	if len(e.Add) == 0 && len(e.Remove) == 0 {
		return e, fmt.Errorf("say which taints: key=value:Effect to add, key:Effect- or key- to remove")
	}
	return e, nil
}

// parseTaint reads key=value:effect, key:effect or key.
func parseTaint(s string) (corev1.Taint, error) {
	var t corev1.Taint
	kv, effect, hasEffect := strings.Cut(s, ":")
	if strings.Contains(effect, ":") {
		return t, fmt.Errorf("invalid taint %q: write key=value:Effect", s)
	}
	if hasEffect {
		switch e := corev1.TaintEffect(effect); e {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			t.Effect = e
		default:
			return t, fmt.Errorf("invalid taint %q: the effect must be NoSchedule, PreferNoSchedule or NoExecute", s)
		}
	}
	key, value, hasValue := strings.Cut(kv, "=")
	if hasValue && !hasEffect {
		return t, fmt.Errorf("taint %q has no effect: write key=value:Effect", s)
	}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return t, fmt.Errorf("invalid taint key %q: %s", key, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return t, fmt.Errorf("invalid taint value %q: %s", value, strings.Join(errs, "; "))
	}
	t.Key, t.Value = key, value
	return t, nil
}

// Apply changes a cluster's own taints (spec.taints; those purser adds in
// status.taints are not the user's to change); it reports whether anything
// changed. A taint of the same key and effect with another value is only
// replaced with Overwrite; removing a taint that is not there is an error.
func (e TaintEdit) Apply(taints []corev1.Taint) ([]corev1.Taint, bool, error) {
	out := slices.Clone(taints)
	changed := false
	for _, rm := range e.Remove {
		n := len(out)
		out = slices.DeleteFunc(out, func(t corev1.Taint) bool {
			return t.Key == rm.Key && (rm.Effect == "" || t.Effect == rm.Effect)
		})
		if len(out) == n {
			what := rm.Key
			if rm.Effect != "" {
				what += ":" + string(rm.Effect)
			}
			return taints, false, fmt.Errorf("there is no taint %s to remove", what)
		}
		changed = true
	}
	for _, add := range e.Add {
		i := slices.IndexFunc(out, func(t corev1.Taint) bool { return t.MatchTaint(&add) })
		switch {
		case i < 0:
			out = append(out, add)
			changed = true
		case out[i].Value == add.Value:
		case !e.Overwrite:
			return taints, false, fmt.Errorf("taint %s:%s is already set with value %q; add --overwrite to change it", add.Key, add.Effect, out[i].Value)
		default:
			out[i].Value = add.Value
			changed = true
		}
	}
	return out, changed, nil
}

// Cordon sets purser's maintenance taint (v1alpha1.TaintCordon) with the
// effect given, or removes it when effect is empty, as the console's
// Cordon, Drain and Uncordon buttons do: NoSchedule keeps new work away,
// NoExecute also moves the work there elsewhere.
func Cordon(taints []corev1.Taint, effect corev1.TaintEffect) ([]corev1.Taint, bool) {
	return v1alpha1.Cordon(taints, effect)
}
