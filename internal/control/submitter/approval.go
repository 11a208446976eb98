package submitter

import (
	"fmt"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/lifecycle"
)

// ApprovalPolicy is what the submitter reads of the policy to hold a
// runnable to the generation an approver approved; policy.Policy and
// auth.Identities provide it.
type ApprovalPolicy interface {
	ApprovalRequired(ns, kind string) bool
}

// unapproved says why r's live spec may not reach a cluster, "" when it
// may: in a namespace that needs approval, the API keeps every change of
// an approved spec beside it until an approver approves it, so a live
// generation later than status.approvedGeneration was written behind the
// API's back (or before approvals bound to a generation, and changed
// since), and no approver saw it. The submitter decides again, as it does
// for kinds, with the policy as it is now. Approvals recorded before
// approvedGeneration existed approved generation 1.
func (s *Submitter) unapproved(r *lifecycle.Runnable) string {
	ap, ok := s.cfg.Policy.(ApprovalPolicy)
	if !ok || !ap.ApprovalRequired(r.Rec.Namespace, v1alpha1.KindRunnable) {
		return ""
	}
	approved := r.Status.ApprovedGeneration
	if approved == 0 && r.Status.ApprovedBy != "" {
		approved = 1
	}
	if r.Rec.Generation <= approved {
		return ""
	}
	if approved == 0 {
		return fmt.Sprintf("namespace %s needs approval and generation %d of the spec was never approved; it is not created", r.Rec.Namespace, r.Rec.Generation)
	}
	return fmt.Sprintf("namespace %s needs approval and generation %d of the spec is not the one %s approved (generation %d); it is not applied",
		r.Rec.Namespace, r.Rec.Generation, r.Status.ApprovedBy, approved)
}
