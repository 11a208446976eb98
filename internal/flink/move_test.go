package flink

import (
	"reflect"
	"testing"
)

func TestMoveStopAndPutBack(t *testing.T) {
	withMode := map[string]any{"spec": map[string]any{"job": map[string]any{"jarURI": "local:///x.jar", "upgradeMode": "last-state"}}}
	plain := map[string]any{"spec": map[string]any{"job": map[string]any{"jarURI": "local:///x.jar"}}}
	session := map[string]any{"spec": map[string]any{"flinkVersion": "v1_20"}}
	if spec, ok := MoveStop(plain); !ok || !reflect.DeepEqual(spec, map[string]any{"job": map[string]any{"state": "suspended", "upgradeMode": "savepoint"}}) {
		t.Errorf("MoveStop = %v, %v", spec, ok)
	}
	if _, ok := MoveStop(session); ok {
		t.Error("a session cluster has no job to stop with a savepoint")
	}
	// Put back as the template has it; an upgradeMode it does not name is
	// given up, not set.
	running := map[string]any{"jobStatus": map[string]any{"state": "RUNNING"}}
	stopped := map[string]any{"jobStatus": map[string]any{"state": "FINISHED"}, "lifecycleState": "SUSPENDED"}
	if got := MovePutBack(withMode, running); !reflect.DeepEqual(got, map[string]any{"job": map[string]any{"state": "running", "upgradeMode": "last-state"}}) {
		t.Errorf("MovePutBack(last-state) = %v", got)
	}
	if got := MovePutBack(plain, running); !reflect.DeepEqual(got, map[string]any{"job": map[string]any{"state": "running"}}) {
		t.Errorf("MovePutBack(plain) = %v", got)
	}
	// A job that stopped resumes from its savepoint, never afresh.
	if got := MovePutBack(plain, stopped); !reflect.DeepEqual(got, map[string]any{"job": map[string]any{"state": "running", "upgradeMode": "savepoint"}}) {
		t.Errorf("MovePutBack(plain, stopped) = %v", got)
	}
	obj := map[string]any{"spec": map[string]any{"job": map[string]any{"jarURI": "local:///x.jar"}}}
	if !RestoreFrom(obj, "s3://sp/savepoint-abcdef-1") || dig(obj, "spec", "job", "initialSavepointPath") != "s3://sp/savepoint-abcdef-1" {
		t.Errorf("RestoreFrom: %v", obj)
	}
	if RestoreFrom(session, "s3://x") {
		t.Error("RestoreFrom set a savepoint on a session cluster")
	}
}

func TestStopSavepointTime(t *testing.T) {
	st := map[string]any{
		"lifecycleState": "SUSPENDED",
		"jobStatus": map[string]any{"state": "FINISHED", "jobId": "abcdef0123456789abcdef0123456789",
			"upgradeSavepointPath": "s3://sp/savepoint-abcdef-new",
			"savepointInfo": map[string]any{"lastSavepoint": map[string]any{
				"location": "s3://sp/savepoint-abcdef-new", "timeStamp": float64(1764676800000), "triggerType": "UPGRADE"}}},
	}
	path, at := StopSavepoint(st, "s3://sp/savepoint-abcdef-old")
	if path != "s3://sp/savepoint-abcdef-new" || at == nil || at.UnixMilli() != 1764676800000 {
		t.Errorf("StopSavepoint = %q, %v", path, at)
	}
	if path, _ := StopSavepoint(st, "s3://sp/savepoint-abcdef-new"); path != "" {
		t.Errorf("the savepoint known before the ask was taken for the stop's: %q", path)
	}
}
