package health

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-io/purser/api/v1alpha1"
)

// widgetRule judges a made-up kind the way a platform team would write a
// rule for its own operator.
var widgetRule = Rule{
	APIVersion: "example.com/*",
	Kind:       "Widget",
	Health:     `object.?status.?ready.orValue(false) ? "Healthy" : "Unhealthy"`,
	Phase:      `object.?status.?ready.orValue(false) ? "Running" : "Pending"`,
	Message:    `object.?status.?message.orValue("")`,
}

func TestRules(t *testing.T) {
	in, err := New([]Rule{
		widgetRule,
		{
			// An exact rule refines the group rule for one version.
			APIVersion: "example.com/v2", Kind: "Widget",
			Health: `"Healthy"`, Phase: `"Succeeded"`, Message: `"v2 is always done"`,
		},
		{
			// Overrides the built-in Job interpreter.
			APIVersion: "batch/v1", Kind: "Job",
			Health: `"Unknown"`, Phase: `"Pending"`, Message: `"judged by a rule: " + object.metadata.name`,
		},
		{
			// A group rule also overrides a built-in.
			APIVersion: "argoproj.io/*", Kind: "Workflow",
			Health: `"Healthy"`, Phase: `"Running"`,
		},
		{
			// Rules see the object as it is, and read the fields they
			// need; deletionTimestamp is theirs to interpret.
			APIVersion: "example.com/v1", Kind: "Gadget",
			Health: `"Healthy"`,
			Phase:  `has(object.metadata.deletionTimestamp) ? "Failed" : "Running"`,
		},
		{
			APIVersion: "example.com/v1", Kind: "Broken",
			Health:  `object.status.phase`,
			Phase:   `"Running"`,
			Message: `"never"`,
		},
		{
			APIVersion: "example.com/v1", Kind: "Liar",
			Health:  `object.?status.?health.orValue("Fine")`,
			Phase:   `object.?status.?phase.orValue("Running")`,
			Message: `object.status.nothing`,
		},
		{
			APIVersion: "example.com/v1", Kind: "Number",
			Health: `object.?status.?count.orValue(0)`,
			Phase:  `"Running"`,
		},
		{
			APIVersion: "example.com/v1", Kind: "Expensive",
			Health: `object.spec.items.all(x, object.spec.items.all(y, x + y >= 0)) ? "Healthy" : "Unhealthy"`,
			Phase:  `"Running"`,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	many := make([]any, 3000)
	for i := range many {
		many[i] = int64(i)
	}
	cases := []struct {
		name string
		obj  map[string]any
		want judgement
	}{
		{"group rule, ready", decode(t, "apiVersion: example.com/v1\nkind: Widget\nstatus: {ready: true, message: all good}"), judgement{H, PhaseRunning, "all good"}},
		{"group rule, no status yet", decode(t, "apiVersion: example.com/v1beta3\nkind: Widget"), judgement{U, PhasePending, ""}},
		{"exact rule wins over group rule", decode(t, "apiVersion: example.com/v2\nkind: Widget"), judgement{H, PhaseSucceeded, "v2 is always done"}},
		{"rule overrides built-in Job", decode(t, "apiVersion: batch/v1\nkind: Job\nmetadata: {name: report}\nstatus: {active: 1}"), judgement{X, PhasePending, "judged by a rule: report"}},
		{"group rule overrides built-in Workflow", decode(t, "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nstatus: {phase: Failed}"), judgement{H, PhaseRunning, ""}},
		{"built-ins without a rule remain", decode(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {generation: 1}\nspec: {replicas: 0}\nstatus: {observedGeneration: 1}"), judgement{H, PhaseRunning, "scaled to zero"}},
		{"rule reads deletionTimestamp itself", decode(t, "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {deletionTimestamp: \"2026-11-29T10:00:00Z\"}"), judgement{H, PhaseFailed, ""}},
		{"rule for another kind of the group does not match", decode(t, "apiVersion: example.com/v1\nkind: Sprocket"), judgement{X, "", "no health interpreter for example.com/v1 Sprocket"}},
		{"runtime error gives Unknown naming the field", decode(t, "apiVersion: example.com/v1\nkind: Broken"), judgement{X, PhasePending, "health rule example.com/v1 Broken: health: no such key: status"}},
		{"value outside Health gives Unknown", decode(t, "apiVersion: example.com/v1\nkind: Liar"), judgement{X, PhasePending, `health: gave "Fine", want one of Healthy, Unhealthy, Unknown`}},
		{"value outside phases gives Unknown", decode(t, "apiVersion: example.com/v1\nkind: Liar\nstatus: {health: Healthy, phase: Done}"), judgement{X, PhasePending, `phase: gave "Done"`}},
		{"failing message keeps the verdict", decode(t, "apiVersion: example.com/v1\nkind: Liar\nstatus: {health: Unhealthy, phase: Failed}"), judgement{U, PhaseFailed, "health rule example.com/v1 Liar: message: no such key: nothing"}},
		{"dyn that is not a string gives Unknown", decode(t, "apiVersion: example.com/v1\nkind: Number\nstatus: {count: 3}"), judgement{X, PhasePending, "health: gave int, want a string"}},
		{"cost limit stops a runaway rule", map[string]any{"apiVersion": "example.com/v1", "kind": "Expensive", "spec": map[string]any{"items": many}}, judgement{X, PhasePending, "cost"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := in.Interpret(tc.obj)
			if got.Health != tc.want.health || got.Phase != tc.want.phase || !strings.Contains(got.Message, tc.want.msg) {
				t.Errorf("got %s %s %q, want %s %s containing %q", got.Health, got.Phase, got.Message, tc.want.health, tc.want.phase, tc.want.msg)
			}
		})
	}
}

func TestRuleErrors(t *testing.T) {
	ok := Rule{APIVersion: "example.com/v1", Kind: "Ok", Health: `"Healthy"`, Phase: `"Running"`}
	cases := []struct {
		name string
		rule Rule
		want string
	}{
		{"syntax error in phase", Rule{APIVersion: "example.com/v1", Kind: "Bad", Health: `"Healthy"`, Phase: `object.status.phase ==`}, `healthRules[1] (example.com/v1 Bad): phase: invalid CEL expression: 1:23: Syntax error`},
		{"unknown variable in message", Rule{APIVersion: "example.com/v1", Kind: "Bad", Health: `"Healthy"`, Phase: `"Running"`, Message: `obj.status`}, `healthRules[1] (example.com/v1 Bad): message: invalid CEL expression: 1:1: undeclared reference to 'obj'`},
		{"health of the wrong type", Rule{APIVersion: "example.com/v1", Kind: "Bad", Health: `1 + 1`, Phase: `"Running"`}, `healthRules[1] (example.com/v1 Bad): health: must give a string, not int`},
		{"health missing", Rule{APIVersion: "example.com/v1", Kind: "Bad", Phase: `"Running"`}, `healthRules[1] (example.com/v1 Bad): health: required`},
		{"phase missing", Rule{APIVersion: "example.com/v1", Kind: "Bad", Health: `"Healthy"`}, `phase: required`},
		{"kind missing", Rule{APIVersion: "example.com/v1", Health: `"Healthy"`, Phase: `"Running"`}, `healthRules[1] (example.com/v1 ): kind: required`},
		{"apiVersion missing", Rule{Kind: "Bad", Health: `"Healthy"`, Phase: `"Running"`}, `apiVersion: "" must be an exact apiVersion or group/*`},
		{"apiVersion wildcard for everything", Rule{APIVersion: "*", Kind: "Bad", Health: `"Healthy"`, Phase: `"Running"`}, `apiVersion: "*" must be`},
		{"apiVersion wildcard in the middle", Rule{APIVersion: "example.*/v1", Kind: "Bad", Health: `"Healthy"`, Phase: `"Running"`}, `apiVersion: "example.*/v1" must be`},
		{"same kind twice", ok, `healthRules[1] (example.com/v1 Ok): same apiVersion and kind as healthRules[0]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New([]Rule{ok, tc.rule})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestLoadRules(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	good := write("good.yaml", `
# Other settings may share the file.
snapshotInterval: 60s
healthRules:
- apiVersion: example.com/*
  kind: Widget
  health: 'object.?status.?ready.orValue(false) ? "Healthy" : "Unhealthy"'
  phase: 'object.?status.?ready.orValue(false) ? "Running" : "Pending"'
  message: 'object.?status.?message.orValue("")'
- apiVersion: batch/v1
  kind: Job
  health: '"Healthy"'
  phase: '"Running"'
`)
	rules, err := LoadRules(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 || rules[0] != widgetRule || rules[1].Kind != "Job" || rules[1].Message != "" {
		t.Fatalf("got %+v", rules)
	}
	if _, err := New(rules); err != nil {
		t.Fatalf("loaded rules do not compile: %v", err)
	}

	none, err := LoadRules(write("none.yaml", "snapshotInterval: 60s\n"))
	if err != nil || len(none) != 0 {
		t.Errorf("file without rules: got %v, %v", none, err)
	}

	for name, tc := range map[string]struct{ content, want string }{
		"misspelt field": {"healthRules:\n- apiVersion: v1\n  kind: Pod\n  helth: '\"Healthy\"'\n", `healthRules[0]: json: unknown field "helth"`},
		"not YAML":       {"healthRules: [\n", "health rules " + filepath.Join(dir, "not YAML.yaml")},
		"not a list":     {"healthRules: 3\n", "health rules"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadRules(write(name+".yaml", tc.content))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := LoadRules(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file: no error")
	}
}

// TestLoad: without a file, the built-ins alone; with one, its rules
// first; a file that cannot be read or compiled is an error.
func TestLoad(t *testing.T) {
	widget := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "status": map[string]any{"ready": true}}
	job := map[string]any{"apiVersion": "batch/v1", "kind": "Job", "status": map[string]any{"succeeded": int64(1),
		"conditions": []any{map[string]any{"type": "Complete", "status": "True"}}}}

	builtins, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if got := builtins.Interpret(widget); got.Health != v1alpha1.HealthUnknown {
		t.Errorf("built-ins only: a Widget is %+v, want Unknown", got)
	}
	if got := builtins.Interpret(job); got.Health != v1alpha1.HealthHealthy {
		t.Errorf("built-ins only: a complete Job is %+v, want Healthy", got)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	content := "healthRules:\n- apiVersion: example.com/*\n  kind: Widget\n  health: '\"Healthy\"'\n  phase: '\"Running\"'\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	withRules, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := withRules.Interpret(widget); got.Health != v1alpha1.HealthHealthy || got.Phase != PhaseRunning {
		t.Errorf("with rules: a Widget is %+v, want Healthy Running", got)
	}
	if got := withRules.Interpret(job); got.Health != v1alpha1.HealthHealthy {
		t.Errorf("with rules: a complete Job is %+v, want Healthy (the built-in)", got)
	}

	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file: no error")
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("healthRules:\n- apiVersion: v1\n  kind: Pod\n  health: 'object.'\n  phase: '\"Running\"'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil {
		t.Error("a rule that does not compile: no error")
	}
}
