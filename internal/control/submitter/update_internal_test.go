package submitter

import (
	"reflect"
	"testing"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/hub/store"
)

func TestUpdatePending(t *testing.T) {
	open := &store.Attempt{Number: 1, ObjectUID: "u1", Generation: 1}
	cases := []struct {
		name   string
		gen    int64
		update *v1alpha1.Update
		a      *store.Attempt
		want   bool
	}{
		{"the object carries the spec", 1, nil, open, false},
		{"a newer spec", 2, &v1alpha1.Update{Generation: 2}, open, true},
		{"a newer spec without status.update (a lost write of it)", 2, nil, open, true},
		{"refused by the cluster", 2, &v1alpha1.Update{Generation: 2, Error: "forbidden"}, open, false},
		{"refused before, changed again", 3, &v1alpha1.Update{Generation: 2, Error: "forbidden"}, open, true},
		{"no object yet", 2, nil, &store.Attempt{Number: 1, Generation: 1}, false},
		{"no open attempt", 2, nil, nil, false},
	}
	for _, c := range cases {
		r := &lifecycle.Runnable{Rec: &store.Runnable{Generation: c.gen}, Status: v1alpha1.RunnableStatus{Update: c.update}}
		if got := updatePending(r, c.a); got != c.want {
			t.Errorf("%s: updatePending = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestMergeInto(t *testing.T) {
	base := map[string]any{"job": map[string]any{"parallelism": 3, "state": "running"}, "image": "flink:1.20"}
	got := mergeInto(base, map[string]any{"job": map[string]any{"state": "suspended"}})
	want := map[string]any{"job": map[string]any{"parallelism": 3, "state": "suspended"}, "image": "flink:1.20"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("merged %v, want %v", got, want)
	}
	if base["job"].(map[string]any)["state"] != "running" {
		t.Fatal("the template itself was changed")
	}
}
