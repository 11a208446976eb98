package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// copyBomb is issue 33's hole 5: a 1 KB map copied into itself n times,
// each copy doubling the document (16 copies: 64 MB).
func copyBomb(n int) (map[string]any, json.RawMessage) {
	tmpl := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "bomb"},
		"data": map[string]any{"k": strings.Repeat("x", 1024)}}
	ops := []string{`{"op":"add","path":"/data/b","value":{}}`}
	for i := range n {
		// /data holds every copy so far: each copy doubles it.
		ops = append(ops, fmt.Sprintf(`{"op":"copy","from":"/data","path":"/data/b/c%d"}`, i))
	}
	return tmpl, json.RawMessage("[" + strings.Join(ops, ",") + "]")
}

// TestCopyBombBounded: the copy bomb is refused by the library's
// accumulated-copy limit, as it copies, in well under a second, and the
// error says the bound rather than quoting the document.
func TestCopyBombBounded(t *testing.T) {
	tmpl, patch := copyBomb(16)
	start := time.Now()
	_, err := ApplyOverrides(tmpl, []Override{{Patch: patch}}, []int{0})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "spec.overrides[0].patch") {
		t.Fatalf("the copy bomb: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the copy bomb took %s to refuse", d)
	}
	// A merge patch that is itself large (within the request limit)
	// renders to a large object, under the bound: accepted.
	big := map[string]any{"data": map[string]any{"big": strings.Repeat("y", 512<<10)}}
	raw, _ := json.Marshal(big)
	if _, err := ApplyOverrides(tmpl, []Override{{Patch: raw}}, []int{0}); err != nil {
		t.Fatalf("a 512 KiB merge patch: %v", err)
	}
	// Three of them in a row pass the rendered bound: refused at the
	// override that crosses it.
	os := []Override{{Patch: raw}, {Patch: json.RawMessage(`[{"op":"copy","from":"/data/big","path":"/data/big2"}]`)},
		{Patch: json.RawMessage(`[{"op":"copy","from":"/data/big","path":"/data/big3"}]`)}}
	_, err = ApplyOverrides(tmpl, os, []int{0, 1, 2})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "spec.overrides[2]") {
		t.Fatalf("three overrides past the bound: %v", err)
	}
	// Validation says so of the override alone.
	d := &Deployable{TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindDeployable}, Metadata: ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: DeployableSpec{Template: tmpl, Overrides: []Override{{Patch: patch}}}}
	errs := ValidateDeployable(d)
	if len(errs) != 1 || errs[0].Field != "spec.overrides[0].patch" || !strings.Contains(errs[0].Message, "copy operations would add more than") {
		t.Fatalf("validation of the copy bomb: %+v", errs)
	}
}

// TestOverrideIdentity: no override may change apiVersion, kind,
// metadata.name or metadata.namespace (hole 10: a ConfigMap patched into
// a Secret), by a JSON patch or a merge patch; validation names the
// override and the field.
func TestOverrideIdentity(t *testing.T) {
	tmpl := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm"}, "data": map[string]any{"k": "v"}}
	for _, c := range []struct{ patch, field string }{
		{`[{"op":"replace","path":"/kind","value":"Secret"}]`, "kind"},
		{`{"kind":"Secret"}`, "kind"},
		{`{"apiVersion":"v2"}`, "apiVersion"},
		{`[{"op":"remove","path":"/apiVersion"}]`, "apiVersion"},
		{`{"metadata":{"name":"other"}}`, "metadata.name"},
		{`{"metadata":{"namespace":"kube-system"}}`, "metadata.namespace"},
		{`[{"op":"add","path":"/metadata/namespace","value":"kube-system"}]`, "metadata.namespace"},
		{`[{"op":"replace","path":"/metadata","value":{"name":7}}]`, "metadata.name"},
	} {
		_, err := ApplyOverrides(tmpl, []Override{{Patch: json.RawMessage(c.patch)}}, []int{0})
		if !errors.Is(err, ErrIdentity) || !strings.Contains(err.Error(), "changes "+c.field) {
			t.Errorf("%s: %v", c.patch, err)
		}
		d := &Deployable{TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindDeployable}, Metadata: ObjectMeta{Name: "c", Namespace: "ns"},
			Spec: DeployableSpec{Template: tmpl, Overrides: []Override{{Patch: json.RawMessage(c.patch)}}}}
		if errs := ValidateDeployable(d); len(errs) != 1 || errs[0].Field != "spec.overrides[0].patch" || !strings.Contains(errs[0].Message, c.field) {
			t.Errorf("validation of %s: %+v", c.patch, errs)
		}
	}
	// Labels and data may change; a later override may not undo the
	// identity an earlier one changed (the first is named).
	if _, err := ApplyOverrides(tmpl, []Override{{Patch: json.RawMessage(`{"metadata":{"labels":{"a":"b"}},"data":{"k":"w"}}`)}}, []int{0}); err != nil {
		t.Fatal(err)
	}
	_, err := ApplyOverrides(tmpl, []Override{{Patch: json.RawMessage(`{"kind":"Secret"}`)}, {Patch: json.RawMessage(`{"kind":"ConfigMap"}`)}}, []int{0, 1})
	if !errors.Is(err, ErrIdentity) || !strings.Contains(err.Error(), "spec.overrides[0]") {
		t.Fatalf("undone identity: %v", err)
	}
}

// TestOverrideRenderings: each override alone, all together, and each
// set a cluster selects; a set that does not apply together is left
// out; an override past a bound refuses the whole.
func TestOverrideRenderings(t *testing.T) {
	tmpl := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm"}, "data": map[string]any{"k": "v"}}
	dc := func(v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"dc": v}}
	}
	os := []Override{
		{ClusterSelector: dc("a"), Patch: json.RawMessage(`[{"op":"remove","path":"/data/k"}]`)},
		{ClusterSelector: dc("b"), Patch: json.RawMessage(`[{"op":"remove","path":"/data/k"}]`)},
		{Patch: json.RawMessage(`{"data":{"x":"y"}}`)},
	}
	rs, err := OverrideRenderings(tmpl, os, []map[string]string{{"dc": "a"}, {"dc": "b"}, {"dc": "c"}})
	if err != nil {
		t.Fatal(err)
	}
	var causes []string
	for _, r := range rs {
		causes = append(causes, r.Cause)
	}
	want := "spec.overrides[0] | spec.overrides[1] | spec.overrides[2] | spec.overrides[0] with spec.overrides[2] | spec.overrides[1] with spec.overrides[2]"
	if got := strings.Join(causes, " | "); got != want {
		t.Fatalf("renderings %s, want %s", got, want)
	}
	tmplBomb, bomb := copyBomb(16)
	if _, err := OverrideRenderings(tmplBomb, []Override{{Patch: json.RawMessage(`{"data":{"x":"y"}}`)}, {Patch: bomb}}, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("the bomb among renderings: %v", err)
	}
}
