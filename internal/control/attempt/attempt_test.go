package attempt

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/purser-io/purser/api/v1alpha1"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestPreserve(t *testing.T) {
	rules := []v1alpha1.StatePreservationRule{
		{AliasLabelName: "flink.apache.org/job-id", JSONPath: "{.jobStatus.jobId}"},
		{AliasLabelName: "example.com/restarts", JSONPath: "{.restarts}"},
	}
	status := map[string]any{"jobStatus": map[string]any{"jobId": "44cc5573", "state": "RECONCILING"}, "restarts": int64(3)}
	c := Preserve(rules, status, nil, nil, nil, 1, true)
	if c.Preserved["flink.apache.org/job-id"] != "44cc5573" || c.Preserved["example.com/restarts"] != "3" || len(c.Notes) != 0 {
		t.Fatalf("first failover: %+v", c)
	}

	// The next attempt ran but never reported a job id: the previous one
	// stays, and the newer restart count wins.
	got := Preserve(rules, map[string]any{"jobStatus": map[string]any{"state": "CREATED"}, "restarts": int64(5)}, c.Preserved, nil, nil, 2, true)
	if got.Preserved["flink.apache.org/job-id"] != "44cc5573" || got.Preserved["example.com/restarts"] != "5" {
		t.Fatalf("second failover: %+v", got)
	}
	if len(got.Notes) != 1 || !strings.Contains(got.Notes[0], "keeping \"44cc5573\"") {
		t.Fatalf("notes %v do not say the old value was kept", got.Notes)
	}

	// No status observed at all, nothing before: nothing preserved.
	got = Preserve(rules[:1], nil, nil, nil, nil, 1, true)
	if got.Preserved != nil || len(got.Notes) != 1 {
		t.Fatalf("no status: %+v", got)
	}
}

// TestPreserveOnlyProvenState is Karmada #6232: an attempt that never ran
// Healthy reports a new job id (and restore point) of a job with no
// state; the next attempt must still restore the earlier, proven one.
func TestPreserveOnlyProvenState(t *testing.T) {
	rules := []v1alpha1.StatePreservationRule{{AliasLabelName: "flink.apache.org/job-id", JSONPath: "{.jobStatus.jobId}"}}
	at := func(m int) *time.Time { x := t0.Add(time.Duration(m) * time.Minute); return &x }
	p1 := &v1alpha1.RestorePoint{Path: "s3://cp/aaaa/chk-7", Kind: v1alpha1.RestoreCheckpoint, JobID: "aaaa", TakenAt: at(0), Attempt: 1}
	status := func(id string) map[string]any {
		return map[string]any{"jobStatus": map[string]any{"jobId": id, "state": "RECONCILING"}}
	}
	tests := []struct {
		name       string
		previous   map[string]string
		prevPoint  *v1alpha1.RestorePoint
		status     map[string]any
		candidates []v1alpha1.RestorePoint
		proven     bool
		wantID     string
		wantPoint  string
		wantNote   string
		wantReport map[string]string
	}{
		{"proven first attempt carries its job id and restore point", nil, nil, status("aaaa"),
			[]v1alpha1.RestorePoint{*p1}, true, "aaaa", "s3://cp/aaaa/chk-7", "", map[string]string{"flink.apache.org/job-id": "aaaa", "restorePath": "s3://cp/aaaa/chk-7"}},
		{"never healthy: the new job id is reported, not carried", map[string]string{"flink.apache.org/job-id": "aaaa"}, p1, status("bbbb"),
			nil, false, "aaaa", "s3://cp/aaaa/chk-7", "attempt 2 never ran Healthy", map[string]string{"flink.apache.org/job-id": "bbbb"}},
		{"never healthy, even with a restore point of its own", map[string]string{"flink.apache.org/job-id": "aaaa"}, p1, status("bbbb"),
			[]v1alpha1.RestorePoint{{Path: "s3://cp/bbbb/chk-1", TakenAt: at(5)}}, false, "aaaa", "s3://cp/aaaa/chk-7", "never ran Healthy", nil},
		{"proven: a newer restore point replaces the older", map[string]string{"flink.apache.org/job-id": "aaaa"}, p1, status("bbbb"),
			[]v1alpha1.RestorePoint{{Path: "s3://cp/bbbb/chk-2", TakenAt: at(5)}}, true, "bbbb", "s3://cp/bbbb/chk-2", "", nil},
		{"proven: an older restore point does not", map[string]string{"flink.apache.org/job-id": "aaaa"}, p1, status("bbbb"),
			[]v1alpha1.RestorePoint{{Path: "s3://sp/old", TakenAt: at(-5)}}, true, "bbbb", "s3://cp/aaaa/chk-7", "is not newer than", nil},
		{"the newest of several candidates", nil, nil, status("cccc"),
			[]v1alpha1.RestorePoint{{Path: "s3://sp/savepoint-cccc-1", TakenAt: at(1)}, {Path: "s3://cp/cccc/chk-9", TakenAt: at(2)}}, true, "cccc", "s3://cp/cccc/chk-9", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Preserve(rules, tt.status, tt.previous, tt.prevPoint, tt.candidates, 2, tt.proven)
			if c.Preserved["flink.apache.org/job-id"] != tt.wantID {
				t.Errorf("job id %q, want %q", c.Preserved["flink.apache.org/job-id"], tt.wantID)
			}
			if got := ""; c.RestorePoint != nil {
				got = c.RestorePoint.Path
				if got != tt.wantPoint {
					t.Errorf("restore point %q, want %q", got, tt.wantPoint)
				}
			} else if tt.wantPoint != "" {
				t.Errorf("no restore point, want %q", tt.wantPoint)
			}
			note := strings.Join(c.Notes, "; ")
			if (tt.wantNote == "") != (note == "") || !strings.Contains(note, tt.wantNote) {
				t.Errorf("notes %q, want %q", note, tt.wantNote)
			}
			if tt.wantReport != nil && !reflect.DeepEqual(c.Reported, tt.wantReport) {
				t.Errorf("reported %v, want %v", c.Reported, tt.wantReport)
			}
		})
	}
}

func TestPrepare(t *testing.T) {
	spec := &v1alpha1.RunnableSpec{Failover: &v1alpha1.Failover{
		Consistency: v1alpha1.ConsistencyAtLeastOne,
		Mutations: []v1alpha1.Mutation{{
			When:  "'flink.apache.org/job-id' in preserved",
			Path:  "spec.job.initialSavepointPath",
			Value: "'s3://checkpoints/' + preserved['flink.apache.org/job-id']",
		}},
	}}
	newObj := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
			"metadata": map[string]any{"name": "wordcount", "labels": map[string]any{"app": "wc"}},
			"spec":     map[string]any{"job": map[string]any{"jarURI": "local:///wc.jar"}},
		}}
	}

	first := newObj()
	if err := Prepare(first, spec, nil, ""); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedString(first.Object, "spec", "job", "initialSavepointPath"); found {
		t.Error("a mutation applied although nothing was preserved")
	}
	if first.GetLabels()[v1alpha1.LabelConsistency] != v1alpha1.ConsistencyAtLeastOne || first.GetLabels()["app"] != "wc" {
		t.Errorf("labels %v", first.GetLabels())
	}

	next := newObj()
	if err := Prepare(next, spec, map[string]string{"flink.apache.org/job-id": "44cc5573"}, ""); err != nil {
		t.Fatal(err)
	}
	if p, _, _ := unstructured.NestedString(next.Object, "spec", "job", "initialSavepointPath"); p != "s3://checkpoints/44cc5573" {
		t.Errorf("initialSavepointPath = %q", p)
	}
	if next.GetLabels()["flink.apache.org/job-id"] != "44cc5573" {
		t.Errorf("alias label missing: %v", next.GetLabels())
	}

	// Without a failover section the object is fenced like AtMostOne.
	plain := newObj()
	if err := Prepare(plain, &v1alpha1.RunnableSpec{}, nil, ""); err != nil {
		t.Fatal(err)
	}
	if plain.GetLabels()[v1alpha1.LabelConsistency] != v1alpha1.ConsistencyAtMostOne {
		t.Errorf("labels %v", plain.GetLabels())
	}

	// A mutation that fails at run time is an error, not a silent skip.
	bad := &v1alpha1.RunnableSpec{Failover: &v1alpha1.Failover{Mutations: []v1alpha1.Mutation{{
		When: "true", Path: "spec.x", Value: "preserved['missing']",
	}}}}
	if err := Prepare(newObj(), bad, map[string]string{}, ""); err == nil || !strings.Contains(err.Error(), "mutations[0].value") {
		t.Errorf("err = %v", err)
	}

	// The example's mutation: restore from the exact restore point carried.
	exact := &v1alpha1.RunnableSpec{Failover: &v1alpha1.Failover{Mutations: []v1alpha1.Mutation{{
		When: "restorePath != ''", Path: "spec.job.initialSavepointPath", Value: "restorePath",
	}}}}
	restored := newObj()
	if err := Prepare(restored, exact, nil, "s3://cp/44cc5573/chk-42"); err != nil {
		t.Fatal(err)
	}
	if p, _, _ := unstructured.NestedString(restored.Object, "spec", "job", "initialSavepointPath"); p != "s3://cp/44cc5573/chk-42" {
		t.Errorf("initialSavepointPath = %q", p)
	}
	fresh := newObj()
	if err := Prepare(fresh, exact, nil, ""); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedString(fresh.Object, "spec", "job", "initialSavepointPath"); found {
		t.Error("restored from nothing")
	}
}

func TestExcluding(t *testing.T) {
	p := v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{Exclude: []string{"a"}}}
	got := Excluding(p, "b")
	if !reflect.DeepEqual(got.ClusterAffinity.Exclude, []string{"a", "b"}) || len(p.ClusterAffinity.Exclude) != 1 {
		t.Errorf("Excluding: %v, and the original became %v", got.ClusterAffinity.Exclude, p.ClusterAffinity.Exclude)
	}
	if got := Excluding(v1alpha1.Placement{}, "b"); !reflect.DeepEqual(got.ClusterAffinity.Exclude, []string{"b"}) {
		t.Errorf("Excluding of an empty placement: %+v", got.ClusterAffinity)
	}
}
