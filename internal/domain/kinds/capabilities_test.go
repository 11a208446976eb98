package kinds

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
)

var deployment = schema.GroupKind{Group: "apps", Kind: "Deployment"}

// The registry asks the driver, and says what purser does for a kind
// whose driver lacks the capability.
func TestSuspendAndFence(t *testing.T) {
	r := Default()
	flinkJob := decode(t, `{spec: {job: {jarURI: "local:///x.jar", upgradeMode: savepoint}}}`)
	flinkSuspended := decode(t, `{spec: {job: {jarURI: "local:///x.jar", state: suspended}}}`)
	session := decode(t, `{spec: {flinkVersion: v1_20}}`)
	for _, tc := range []struct {
		name     string
		gk       schema.GroupKind
		template map[string]any
		suspend  bool
		want     map[string]any
	}{
		{"job", Job, nil, true, map[string]any{"suspend": true}},
		{"job resumed", Job, nil, false, map[string]any{"suspend": false}},
		{"workflow", ArgoWorkflow, nil, true, map[string]any{"suspend": true}},
		{"flink", FlinkDeployment, flinkJob, true, map[string]any{"job": map[string]any{"state": "suspended"}}},
		{"flink written suspended", FlinkDeployment, flinkSuspended, true, map[string]any{"job": map[string]any{"state": "suspended"}}},
		{"flink resumed", FlinkDeployment, flinkSuspended, false, map[string]any{"job": map[string]any{"state": "suspended"}}},
		{"flink resumed to running", FlinkDeployment, flinkJob, false, map[string]any{"job": map[string]any{"state": "running"}}},
	} {
		got, err := r.SuspendSpec(tc.gk, tc.template, tc.suspend)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: SuspendSpec = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	for _, gk := range []schema.GroupKind{deployment, CronJob, {Group: "example.com", Kind: "Widget"}} {
		var refused *NotSuspendableError
		if _, err := r.SuspendSpec(gk, nil, true); !errors.As(err, &refused) || !strings.Contains(err.Error(), gk.String()+" cannot be suspended") {
			t.Errorf("%s: SuspendSpec err = %v, want a NotSuspendableError naming it", gk, err)
		}
	}
	var refused *NotSuspendableError
	if _, err := r.SuspendSpec(FlinkDeployment, session, true); !errors.As(err, &refused) {
		t.Errorf("a session cluster: err = %v, want a NotSuspendableError", err)
	}

	for _, tc := range []struct {
		name   string
		gk     schema.GroupKind
		obj    map[string]any
		spec   map[string]any
		remove bool
	}{
		{"running job", Job, decode(t, `{spec: {parallelism: 1}}`), map[string]any{"suspend": true}, false},
		{"suspended job", Job, decode(t, `{spec: {suspend: true}}`), nil, false},
		{"flink", FlinkDeployment, flinkJob, map[string]any{"job": map[string]any{"state": "suspended"}}, false},
		{"suspended flink", FlinkDeployment, flinkSuspended, nil, false},
		{"session cluster", FlinkDeployment, session, nil, true},
		{"workflow", ArgoWorkflow, decode(t, `{spec: {entrypoint: main}}`), nil, true},
		{"deployment", deployment, decode(t, `{spec: {replicas: 1}}`), nil, true},
	} {
		spec, remove := r.Fence(tc.gk, tc.obj)
		if remove != tc.remove || !reflect.DeepEqual(spec, tc.spec) {
			t.Errorf("%s: Fence = %v, %v; want %v, %v", tc.name, spec, remove, tc.spec, tc.remove)
		}
	}
	for _, tc := range []struct {
		name     string
		gk       schema.GroupKind
		template map[string]any
		spec     map[string]any
		ok       bool
	}{
		{"job", Job, decode(t, `{spec: {parallelism: 1}}`), map[string]any{"suspend": false}, true},
		{"job written suspended", Job, decode(t, `{spec: {suspend: true}}`), map[string]any{"suspend": true}, true},
		{"flink", FlinkDeployment, flinkJob, map[string]any{"job": map[string]any{"state": "running"}}, true},
		{"workflow, deleted by fencing", ArgoWorkflow, nil, nil, false},
	} {
		spec, ok := r.Unfence(tc.gk, tc.template)
		if ok != tc.ok || !reflect.DeepEqual(spec, tc.spec) {
			t.Errorf("%s: Unfence = %v, %v; want %v, %v", tc.name, spec, ok, tc.spec, tc.ok)
		}
	}
}

func TestInPlaceAndMoves(t *testing.T) {
	r := Default()
	for _, tc := range []struct {
		gk          schema.GroupKind
		refusal     string // "" : taken in place
		unsupported bool
	}{
		{FlinkDeployment, "", false},
		{Job, "a Job's pod template is immutable on its cluster", false},
		{ArgoWorkflow, "status.storedWorkflowTemplateSpec", false},
		{deployment, "changing the object of a running Deployment.apps in place is not supported yet", true},
	} {
		err := r.InPlace(tc.gk, nil, nil)
		if tc.refusal == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.gk, err)
			}
			continue
		}
		var refused *InPlaceError
		if !errors.As(err, &refused) || refused.Unsupported != tc.unsupported || !strings.Contains(err.Error(), tc.refusal) {
			t.Errorf("%s: InPlace = %#v, want %q (unsupported %v)", tc.gk, err, tc.refusal, tc.unsupported)
		}
	}
	flinkJob := decode(t, `{spec: {job: {jarURI: "local:///x.jar"}}}`)
	if m := r.UpgradeMode(FlinkDeployment, flinkJob); m != "stateless" {
		t.Errorf("flink upgradeMode %q, want the operator's default stateless", m)
	}
	if m := r.UpgradeMode(Job, nil); m != "" {
		t.Errorf("a Job's upgradeMode %q", m)
	}
	if !r.MovesBySavepoint(FlinkDeployment, flinkJob) || r.MovesBySavepoint(FlinkDeployment, decode(t, `{spec: {}}`)) ||
		r.MovesBySavepoint(Job, nil) {
		t.Error("only a FlinkDeployment that runs a job moves by savepoint")
	}
}

func TestDemand(t *testing.T) {
	r := Default()
	for _, tc := range []struct {
		doc    string
		want   []string // what and count of each group
		oneOf  bool
		counts bool
	}{
		{`{apiVersion: v1, kind: Pod, spec: {containers: [{name: c}]}}`, []string{"pod 1"}, false, true},
		{`{apiVersion: batch/v1, kind: Job, spec: {parallelism: 4, completions: 3, template: {spec: {containers: [{name: c}]}}}}`,
			[]string{"pods (parallelism) 3"}, false, true},
		{`{apiVersion: batch/v1, kind: CronJob, spec: {jobTemplate: {spec: {template: {spec: {containers: [{name: c}]}}}}}}`,
			[]string{"pods (parallelism) 1"}, false, true},
		{`{apiVersion: apps/v1, kind: StatefulSet, spec: {replicas: 5, template: {spec: {containers: [{name: c}]}}}}`,
			[]string{"pods (replicas) 5"}, false, true},
		{`{apiVersion: apps/v1, kind: Deployment, spec: {}}`, nil, false, true},
		{`{apiVersion: apps/v1, kind: DaemonSet, spec: {template: {spec: {containers: [{name: c}]}}}}`, nil, false, false},
		{`{apiVersion: flink.apache.org/v1beta1, kind: FlinkDeployment, spec: {job: {parallelism: 4}, flinkConfiguration: {taskmanager.numberOfTaskSlots: "2"}}}`,
			[]string{"jobmanager 1", "taskmanager 2"}, false, true},
		{wf("  entrypoint: a\n  templates:\n  - {name: a, container: {image: x}}\n  - {name: b, script: {image: python, source: s}}\n  - {name: c, resource: {action: get, manifest: '{kind: ConfigMap}'}}\n"),
			[]string{"pod (largest step, spec.templates[0] (a)) 1", "pod (largest step, spec.templates[1] (b)) 1"}, true, true},
	} {
		d, ok, err := r.Demand(decode(t, tc.doc))
		if err != nil || ok != tc.counts || d.OneAtATime != tc.oneOf {
			t.Errorf("%s: Demand = %+v, %v, %v", tc.doc, d, ok, err)
			continue
		}
		var got []string
		for _, g := range d.Groups {
			got = append(got, g.What+" "+strconv.FormatInt(g.Count, 10))
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s: groups %q, want %q", tc.doc, got, tc.want)
		}
	}
	if _, _, err := r.Demand(decode(t, `{apiVersion: batch/v1, kind: Job, spec: {template: {spec: {containers: "no"}}}}`)); err == nil ||
		!strings.Contains(err.Error(), "does not decode as a pod spec") {
		t.Errorf("a Job whose pod spec does not decode: err = %v", err)
	}
}

func TestFailureAndPods(t *testing.T) {
	r := Default()
	failed := map[string]any{"conditions": []any{map[string]any{"type": "Failed", "status": "True",
		"reason": "PodFailurePolicy", "message": "Container main for pod ns/p-1 failed with exit code 3 matching FailJob rule at index 0"}}}
	if f := r.ClassifyFailure(Job, failed); f.Class != v1alpha1.FailureExitCode || f.ExitCode == nil || *f.ExitCode != 3 {
		t.Errorf("a Job's failure: %+v", f)
	}
	if f := r.ClassifyFailure(ArgoWorkflow, map[string]any{"message": "child failed"}); f.Class != v1alpha1.FailureOther || f.Reason != "child failed" {
		t.Errorf("a Workflow's failure: %+v", f)
	}
	if s := r.PodSelector(Job, "u-1"); s != "batch.kubernetes.io/controller-uid=u-1" {
		t.Errorf("a Job's pods: %q", s)
	}
	if s := r.PodSelector(deployment, "u-1"); s != "" {
		t.Errorf("a Deployment's pods: %q", s)
	}
}
