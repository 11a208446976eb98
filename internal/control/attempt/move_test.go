package attempt

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/purser-io/purser/api/v1alpha1"
)

func TestMoveHandsOver(t *testing.T) {
	m := &v1alpha1.Move{From: "a", To: "b", Attempt: 1, Step: v1alpha1.MoveCopyStarting, Savepoint: "s3://sp/savepoint-abcdef-1"}
	if Moving(m, 1, v1alpha1.ReasonPlannedMove) != m {
		t.Error("the move's own attempt ended: its next attempt goes to the target")
	}
	for _, c := range []struct {
		name   string
		m      *v1alpha1.Move
		number int
		reason string
	}{
		{"no move", nil, 1, v1alpha1.ReasonPlannedMove},
		{"an attempt evicted otherwise", m, 1, "NoExecuteTaint"},
		{"another attempt", m, 2, v1alpha1.ReasonPlannedMove},
		{"a move done", &v1alpha1.Move{To: "b", Attempt: 1, Step: v1alpha1.MoveDone}, 1, v1alpha1.ReasonPlannedMove},
	} {
		if Moving(c.m, c.number, c.reason) != nil {
			t.Errorf("%s: placed toward the move's target", c.name)
		}
	}

	p := Toward(Excluding(v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{ClusterNames: []string{"a", "b", "c"}, Exclude: []string{"b"}}}, "a"), "b")
	if !reflect.DeepEqual(p.ClusterAffinity.ClusterNames, []string{"b"}) || !reflect.DeepEqual(p.ClusterAffinity.Exclude, []string{"a"}) {
		t.Errorf("Toward: %+v", p.ClusterAffinity)
	}

	obj := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"job": map[string]any{
			"jarURI": "local:///x.jar", "initialSavepointPath": "s3://cp/older/chk-3"}}}}
	}
	o := obj()
	if !HandOver(o, m, 2) {
		t.Fatal("the next attempt does not restore the move's savepoint")
	}
	if p, _, _ := unstructured.NestedString(o.Object, "spec", "job", "initialSavepointPath"); p != m.Savepoint {
		t.Errorf("initialSavepointPath %q, want exactly %q", p, m.Savepoint)
	}
	if HandOver(obj(), m, 1) || HandOver(obj(), &v1alpha1.Move{Attempt: 1, Step: v1alpha1.MoveCopyStarting}, 2) ||
		HandOver(obj(), &v1alpha1.Move{Attempt: 1, Step: v1alpha1.MoveDone, Savepoint: "s3://x"}, 2) {
		t.Error("HandOver set a savepoint outside a move's copy")
	}
}
