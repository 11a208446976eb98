package submitter

import (
	"strings"
	"testing"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// TestUnapproved: in a namespace that needs approval, only a generation
// an approver approved reaches a cluster; elsewhere approval is not asked.
func TestUnapproved(t *testing.T) {
	pol, err := policy.NewPolicy(policy.PolicyFile{Namespaces: map[string]policy.NamespacePolicy{
		"strict": {Approval: policy.Approval{Runnables: true}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := &Submitter{cfg: Config{Policy: pol}}
	for _, tc := range []struct {
		name, ns   string
		generation int64
		status     v1alpha1.RunnableStatus
		says       string
	}{
		{"approved as it is", "strict", 2, v1alpha1.RunnableStatus{ApprovedBy: "carol", ApprovedGeneration: 2}, ""},
		{"approved before approvals named a generation", "strict", 1, v1alpha1.RunnableStatus{ApprovedBy: "carol"}, ""},
		{"ahead of its approval", "strict", 2, v1alpha1.RunnableStatus{ApprovedBy: "carol", ApprovedGeneration: 1},
			"generation 2 of the spec is not the one carol approved (generation 1)"},
		{"changed since an approval without a generation", "strict", 2, v1alpha1.RunnableStatus{ApprovedBy: "carol"}, "not the one carol approved (generation 1)"},
		{"never approved", "strict", 1, v1alpha1.RunnableStatus{}, "generation 1 of the spec was never approved"},
		{"no approval needed", "open", 5, v1alpha1.RunnableStatus{}, ""},
	} {
		r := &lifecycle.Runnable{Rec: &store.Runnable{Namespace: tc.ns, Name: "r", Generation: tc.generation}, Status: tc.status}
		got := s.unapproved(r)
		if (tc.says == "") != (got == "") || !strings.Contains(got, tc.says) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.says)
		}
	}
	if got := (&Submitter{}).unapproved(&lifecycle.Runnable{Rec: &store.Runnable{Namespace: "strict", Generation: 3}}); got != "" {
		t.Errorf("without a policy: %q", got)
	}
}
