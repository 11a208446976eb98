package admission_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/domain/admission"
)

// renderCase is one of issue 33's holes in rendering: a template the
// review admits, and an override or failover mutation that makes a
// writer apply what it refuses. The fuzz target starts from them.
type renderCase struct {
	name      string
	template  string // YAML
	overrides string // YAML list of spec.overrides, or ""
	mutations string // YAML list of spec.failover.mutations, or ""
	cause     string // what Written must blame, "" when it admits every rendering
	want      string // in the refusal
}

const (
	plainJob = `{apiVersion: batch/v1, kind: Job, spec: {template: {spec: {restartPolicy: Never, containers: [{name: main, image: busybox}]}}}}`
	plainDep = `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: main, image: nginx}]}}}}`
	plainWF  = `{apiVersion: argoproj.io/v1alpha1, kind: Workflow, spec: {entrypoint: main, templates: [{name: main, container: {image: busybox}}]}}`
)

var renderCases = []renderCase{
	{name: "a mutation setting hostPID", template: plainJob,
		mutations: `[{when: "true", path: spec.backoffLimit, value: "3"}, {when: "'x' in preserved", path: spec.template.spec.hostPID, value: "true"}]`,
		cause:     "spec.failover.mutations[1]", want: "host namespaces"},
	{name: "a mutation choosing the node", template: plainJob,
		mutations: `[{when: "true", path: spec.template.spec.nodeName, value: "'node-1'"}]`,
		cause:     "spec.failover.mutations[0]", want: "places the pod on a node of its choosing"},
	{name: "a mutation borrowing purser's service account", template: plainJob,
		mutations: `[{when: "true", path: spec.template.spec.serviceAccountName, value: "'purser-agent'"}]`,
		cause:     "spec.failover.mutations[0]", want: `service account "purser-agent"`},
	{name: "a mutation giving a Workflow a podSpecPatch", template: plainWF,
		mutations: `[{when: "true", path: spec.podSpecPatch, value: "'{\"hostPID\": true}'"}]`,
		// The patch is applied as Argo's controller applies it, and the
		// pod it makes is judged.
		cause: "spec.failover.mutations[0]", want: "hostPID=true"},
	{name: "a harmless mutation", template: plainJob,
		mutations: `[{when: "true", path: spec.backoffLimit, value: "3"}, {when: "true", path: spec.template.metadata.labels.restore, value: "'yes'"}]`},
	{name: "a JSON patch override making the container privileged", template: plainDep,
		overrides: `[{clusterSelector: {matchLabels: {dc: dc-1}}, patch: {spec: {replicas: 2}}}, {clusterSelector: {matchLabels: {dc: dc-2}}, patch: [{op: add, path: /spec/template/spec/containers/0/securityContext, value: {privileged: true}}]}]`,
		cause:     "spec.overrides[1]", want: "privileged"},
	{name: "a merge patch override setting hostPID", template: plainDep,
		overrides: `[{patch: {spec: {template: {spec: {hostPID: true}}}}}]`,
		cause:     "spec.overrides[0]", want: "host namespaces"},
	{name: "a JSON patch override choosing the node", template: plainDep,
		overrides: `[{patch: [{op: add, path: /spec/template/spec/nodeName, value: node-1}]}]`,
		cause:     "spec.overrides[0]", want: "node of its choosing"},
	{name: "an override borrowing purser's service account", template: plainDep,
		overrides: `[{patch: [{op: add, path: /spec/template/spec/serviceAccountName, value: purser-agent}]}]`,
		cause:     "spec.overrides[0]", want: `service account "purser-agent"`},
	{name: "a harmless override", template: plainDep,
		overrides: `[{patch: {spec: {replicas: 3}}}, {patch: [{op: replace, path: /spec/template/spec/containers/0/image, value: nginx:2}]}]`},
}

func mustYAML(t testing.TB, doc string, out any) {
	t.Helper()
	if doc == "" {
		return
	}
	if err := yaml.Unmarshal([]byte(doc), out); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
}

func baseline(t testing.TB) admission.Review {
	return admission.Review{Checker: admission.DefaultChecker(), Level: admission.LevelBaseline, Namespace: "team-a", Runnable: true,
		Kind: func(map[string]any, string) error { return nil }}
}

// renderings is what the API reviews at accept for a case.
func renderings(t testing.TB, c renderCase) []v1alpha1.Rendering {
	var tmpl map[string]any
	mustYAML(t, c.template, &tmpl)
	var os []v1alpha1.Override
	mustYAML(t, c.overrides, &os)
	var ms []v1alpha1.Mutation
	mustYAML(t, c.mutations, &ms)
	rs, err := v1alpha1.OverrideRenderings(tmpl, os, nil)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	spec := &v1alpha1.RunnableSpec{Template: tmpl}
	if len(ms) > 0 {
		spec.Failover = &v1alpha1.Failover{Mutations: ms}
	}
	return append(rs, attempt.Renderings(spec)...)
}

// TestWrittenRefusesRenderings: issue 33's holes 2 and 4, by the one
// admission of what is written: the template passes, the rendering by the
// override or the mutation is refused, naming it and the rule.
func TestWrittenRefusesRenderings(t *testing.T) {
	review := baseline(t)
	for _, c := range renderCases {
		var tmpl map[string]any
		mustYAML(t, c.template, &tmpl)
		if err := review.Written(tmpl, ""); err != nil {
			t.Fatalf("%s: the template alone is refused: %v", c.name, err)
		}
		var first *admission.Denied
		for _, r := range renderings(t, c) {
			if err := review.Written(r.Object, r.Cause); err != nil && first == nil {
				if !errors.As(err, &first) {
					t.Fatalf("%s: not a *Denied: %v", c.name, err)
				}
			}
		}
		switch {
		case c.cause == "" && first != nil:
			t.Errorf("%s: refused: %v", c.name, first)
		case c.cause != "" && first == nil:
			t.Errorf("%s: admitted", c.name)
		case c.cause != "" && (first.Cause != c.cause || !strings.Contains(first.Error(), c.want) || !strings.Contains(first.Error(), "as "+c.cause+" renders it")):
			t.Errorf("%s: refused as %q: %v; want %s blamed, saying %s", c.name, first.Cause, first, c.cause, c.want)
		}
	}
}

// TestWrittenBoundsSize: an object past the rendered bound is refused,
// saying so, whatever the rules.
func TestWrittenBoundsSize(t *testing.T) {
	obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": strings.Repeat("x", v1alpha1.MaxRenderedBytes)}}
	var denied *admission.Denied
	err := baseline(t).Written(obj, "spec.overrides[0]")
	if !errors.As(err, &denied) || denied.Cause != "spec.overrides[0]" || !strings.Contains(err.Error(), "bytes a rendered object may have") {
		t.Fatalf("an object past the bound: %v", err)
	}
}

// FuzzRender renders a template with overrides and failover mutations as
// the API does at accept and the writers do before they write, and
// reviews each rendering: nothing panics, no rendering passes the bound,
// none changes which object the template is, and every refusal is a
// *Denied naming what it blames.
func FuzzRender(f *testing.F) {
	for _, c := range renderCases {
		var tmpl, os, ms any
		mustYAML(f, c.template, &tmpl)
		mustYAML(f, c.overrides, &os)
		mustYAML(f, c.mutations, &ms)
		a, _ := json.Marshal(tmpl)
		b, _ := json.Marshal(os)
		m, _ := json.Marshal(ms)
		f.Add(a, b, m)
	}
	bombOps := []string{`{"op":"add","path":"/data/b","value":{}}`}
	for range 20 {
		bombOps = append(bombOps, `{"op":"copy","from":"/data","path":"/data/b/c"}`)
	}
	f.Add([]byte(`{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"`+strings.Repeat("x", 1024)+`"}}`),
		[]byte(`[{"patch":[`+strings.Join(bombOps, ",")+`]}]`), []byte(`null`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}}`),
		[]byte(`[{"patch":[{"op":"replace","path":"/kind","value":"Secret"}]}]`), []byte(`null`))
	review := baseline(f)
	f.Fuzz(func(t *testing.T, tmplJSON, overridesJSON, mutationsJSON []byte) {
		var tmpl map[string]any
		var os []v1alpha1.Override
		var ms []v1alpha1.Mutation
		if json.Unmarshal(tmplJSON, &tmpl) != nil || tmpl == nil || json.Unmarshal(overridesJSON, &os) != nil || json.Unmarshal(mutationsJSON, &ms) != nil {
			return
		}
		if len(os) > 8 || len(ms) > 8 {
			return // the renderings grow with the pairs; a few show every path
		}
		var rs []v1alpha1.Rendering
		if ors, err := v1alpha1.OverrideRenderings(tmpl, os, nil); err == nil {
			rs = ors
			for _, r := range ors {
				for _, field := range v1alpha1.IdentityFields {
					if a, b := lookup(tmpl, field), lookup(r.Object, field); a != b {
						t.Fatalf("%s changed %v: %q -> %q", r.Cause, field, a, b)
					}
				}
			}
		} else if !errors.Is(err, v1alpha1.ErrTooLarge) && !errors.Is(err, v1alpha1.ErrIdentity) {
			t.Fatalf("OverrideRenderings refused with neither bound: %v", err)
		}
		spec := &v1alpha1.RunnableSpec{Template: tmpl}
		if len(ms) > 0 {
			spec.Failover = &v1alpha1.Failover{Mutations: ms}
		}
		rs = append(rs, attempt.Renderings(spec)...)
		for _, r := range rs {
			raw, err := json.Marshal(r.Object)
			if err == nil && len(raw) > v1alpha1.MaxRenderedBytes+64<<10 {
				// Mutations add at most their values to the template, which
				// the request bound keeps small; overrides are bounded.
				t.Fatalf("%s rendered %d bytes", r.Cause, len(raw))
			}
			err = review.Written(r.Object, r.Cause)
			var denied *admission.Denied
			if err != nil && (!errors.As(err, &denied) || denied.Cause != r.Cause) {
				t.Fatalf("%s: refusal %v is not a *Denied blaming it", r.Cause, err)
			}
		}
	})
}

func lookup(obj map[string]any, path []string) string {
	var cur any = obj
	for _, p := range path {
		m, _ := cur.(map[string]any)
		cur = m[p]
	}
	b, _ := json.Marshal(cur)
	return string(b)
}
