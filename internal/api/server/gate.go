package server

import (
	"context"
	"encoding/json"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/domain/submission"
)

// gate is the judge of work by the policy in force, for one decision:
// the same one the scheduler asks before a tick creates a runnable
// (submission.Gate).
func (s *Server) gate() *submission.Gate {
	return &submission.Gate{Policy: s.policy(), Store: s.cfg.Store, Pods: s.pods, Renderings: attempt.Renderings, Now: s.now}
}

// The handlers' names for the gate's checks.

func (s *Server) defaultPriority(ns string, spec *v1alpha1.RunnableSpec) {
	s.gate().DefaultPriority(ns, spec)
}

func (s *Server) authorizePriority(u policy.User, ns string, spec *v1alpha1.RunnableSpec, what string) error {
	return s.gate().AuthorizePriority(u, ns, spec, what)
}

func (s *Server) admit(ctx context.Context, u policy.User, ns string, tmpl map[string]any, runnable bool) error {
	return s.gate().Admit(ctx, u, ns, tmpl, runnable)
}

func (s *Server) admitRunnable(ctx context.Context, u policy.User, ns string, spec *v1alpha1.RunnableSpec) error {
	return s.gate().AdmitRunnable(ctx, u, ns, spec)
}

func (s *Server) admitRenderings(ctx context.Context, u policy.User, ns string, runnable bool, rs []v1alpha1.Rendering) error {
	return s.gate().AdmitRenderings(ctx, u, ns, runnable, rs)
}

// redactValues is submission.Redact: what the audit log keeps of a spec.
func redactValues(details any) (json.RawMessage, error) {
	return submission.Redact(details)
}

func templateKind(t map[string]any) string { return submission.TemplateKind(t) }
