package flink

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
)

func TestReportedSavepoint(t *testing.T) {
	// SavepointInfo.lastSavepoint as the operator writes it.
	st := map[string]any{"jobStatus": map[string]any{"jobId": "44cc", "savepointInfo": map[string]any{
		"lastSavepoint": map[string]any{"location": "s3://sp/savepoint-44cc55-0a1b", "timeStamp": float64(1796112152248), "triggerType": "PERIODIC"}}}}
	p := ReportedSavepoint(st)
	if p == nil || p.Path != "s3://sp/savepoint-44cc55-0a1b" || p.Kind != v1alpha1.RestoreSavepoint || p.TakenAt == nil || p.TakenAt.UnixMilli() != 1796112152248 || p.JobID != "" {
		t.Fatalf("got %+v (job 44cc did not write savepoint-44cc55)", p)
	}
	st["jobStatus"].(map[string]any)["jobId"] = "44cc55aa"
	if p := ReportedSavepoint(st); p == nil || p.JobID != "44cc55aa" {
		t.Fatalf("a savepoint of the current job: %+v", p)
	}
	// The upgrade's savepoint of the job before against a checkpoint of
	// the current job completed in the same second: the current job's wins.
	sameSecond := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	later := sameSecond.Add(55 * time.Millisecond)
	got := OfCurrentJob([]v1alpha1.RestorePoint{{Path: "s3://sp/savepoint-eb8444-1", TakenAt: &later}, {Path: "s3://cp/5c9d/chk-1", JobID: "5c9d", TakenAt: &sameSecond}}, "5c9d")
	if len(got) != 1 || got[0].Path != "s3://cp/5c9d/chk-1" {
		t.Errorf("OfCurrentJob = %+v", got)
	}
	dummy := map[string]any{"jobStatus": map[string]any{"savepointInfo": map[string]any{"lastSavepoint": map[string]any{"location": lastStateDummy}}}}
	if p := ReportedSavepoint(dummy); p != nil {
		t.Errorf("the last-state placeholder is no location: %+v", p)
	}
	if d := CheckpointDir(map[string]any{"spec": map[string]any{"flinkConfiguration": map[string]any{"state.checkpoints.dir": "s3://cp"}}}); d != "s3://cp" {
		t.Errorf("checkpoint dir %q", d)
	}
}

// A FlinkStateSnapshot as the operator (1.10+) leaves a completed one:
// FlinkStateSnapshotUtils.createSavepointResource and snapshotSuccessful.
func TestSnapshotPoint(t *testing.T) {
	snap := func(state, ref string, checkpoint bool) map[string]any {
		spec := map[string]any{"jobReference": map[string]any{"kind": "FlinkDeployment", "name": ref}}
		if checkpoint {
			spec["checkpoint"] = map[string]any{}
		} else {
			spec["savepoint"] = map[string]any{"path": "s3://sp", "alreadyExists": false}
		}
		return map[string]any{"metadata": map[string]any{"name": "wordcount-periodic-1"}, "spec": spec,
			"status": map[string]any{"state": state, "path": "s3://sp/savepoint-44cc55-0a1b", "resultTimestamp": "2026-11-29T12:00:00.123456Z"}}
	}
	p := SnapshotPoint(snap("COMPLETED", "wordcount", false), "wordcount", "")
	if p == nil || p.Path != "s3://sp/savepoint-44cc55-0a1b" || p.Kind != v1alpha1.RestoreSavepoint || p.TakenAt == nil ||
		!p.TakenAt.Equal(time.Date(2026, 11, 29, 12, 0, 0, 123456000, time.UTC)) || !strings.Contains(p.Source, "FlinkStateSnapshot wordcount-periodic-1") || p.JobID != "" {
		t.Fatalf("completed savepoint: %+v", p)
	}
	if p := SnapshotPoint(snap("COMPLETED", "wordcount", false), "wordcount", "44cc55aa"); p == nil || p.JobID != "44cc55aa" {
		t.Errorf("a savepoint of the current job: %+v", p)
	}
	if p := SnapshotPoint(snap("COMPLETED", "wordcount", true), "wordcount", ""); p == nil || p.Kind != v1alpha1.RestoreCheckpoint {
		t.Errorf("completed checkpoint: %+v", p)
	}
	for _, tc := range []struct{ state, ref string }{{"IN_PROGRESS", "wordcount"}, {"FAILED", "wordcount"}, {"ABANDONED", "wordcount"}, {"COMPLETED", "other"}} {
		if p := SnapshotPoint(snap(tc.state, tc.ref, false), "wordcount", ""); p != nil {
			t.Errorf("%s of %s gave %+v", tc.state, tc.ref, p)
		}
	}
}

func TestWrittenBy(t *testing.T) {
	for _, tc := range []struct {
		path, job string
		want      bool
	}{
		{"s3://sp/savepoint-44cc55-0a1b", "44cc55aa", true},
		{"s3://sp/savepoint-eb8444-0a1b", "44cc55aa", false},
		{"s3://cp/44cc55aa/chk-42", "44cc55aa", true},
		{"s3://cp/44cc55ab/chk-42", "44cc55aa", false},
		{"s3://sp/savepoint-44cc55-0a1b", "", false},
	} {
		if got := WrittenBy(tc.path, tc.job); got != tc.want {
			t.Errorf("WrittenBy(%s, %s) = %v", tc.path, tc.job, got)
		}
	}
}

// TestSuspension: what the agent's fencing does to a FlinkDeployment, and
// what the controller's resume undoes.
func TestSuspension(t *testing.T) {
	suspended := map[string]any{"job": map[string]any{"state": "suspended"}}
	for _, tc := range []struct {
		name   string
		spec   map[string]any
		want   map[string]any
		remove bool
	}{
		{"running", map[string]any{"job": map[string]any{"jarURI": "local:///j.jar", "state": "running"}}, suspended, false},
		{"no state", map[string]any{"job": map[string]any{"jarURI": "local:///j.jar"}}, suspended, false},
		{"suspended", map[string]any{"job": map[string]any{"state": "suspended"}}, nil, false},
		{"session cluster", map[string]any{"flinkVersion": "v1_20"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, remove := Suspension(map[string]any{"spec": tc.spec})
			if remove != tc.remove || !reflect.DeepEqual(spec, tc.want) {
				t.Errorf("got %v remove=%v, want %v remove=%v", spec, remove, tc.want, tc.remove)
			}
		})
	}
	if got := Resumption(map[string]any{"spec": map[string]any{"job": map[string]any{"jarURI": "x"}}}); !reflect.DeepEqual(got, map[string]any{"job": map[string]any{"state": "running"}}) {
		t.Errorf("resumption of a template without a state: %v", got)
	}
	if got := Resumption(map[string]any{"spec": map[string]any{"job": map[string]any{"state": "suspended"}}}); !reflect.DeepEqual(got, suspended) {
		t.Errorf("resumption of a template submitted suspended: %v", got)
	}
}
