package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/attempt"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// admitRunnable reviews a runnable's template (admit) and what its
// failover mutations would make of it for a later attempt, each alone
// and all together (attempt.Renderings), with the one admission of what
// is written (admission.Review.Written) that the submitter calls before
// each create: a 422 naming the mutation, rather than an attempt that
// fails later with AdmissionDenied.
func (s *Server) admitRunnable(ctx context.Context, u policy.User, ns string, spec *v1alpha1.RunnableSpec) error {
	if err := s.admit(ctx, u, ns, spec.Template, true); err != nil {
		return err
	}
	return s.admitRenderings(ctx, u, ns, true, attempt.Renderings(spec))
}

// admitDeployable reviews a deployable's template (admit) and what its
// overrides make of it: each alone, all together, and each set a
// registered cluster's labels select (v1alpha1.OverrideRenderings), with
// the admission the syncer calls before each apply. An override that
// changes which object the template is, or renders an object past the
// bound, is refused whatever the clusters.
func (s *Server) admitDeployable(ctx context.Context, u policy.User, ns string, spec *v1alpha1.DeployableSpec) error {
	if err := s.admit(ctx, u, ns, spec.Template, false); err != nil {
		return err
	}
	if len(spec.Overrides) == 0 {
		return nil
	}
	var labels []map[string]string
	if len(spec.Overrides) > 1 {
		var clusters []*store.Cluster
		if err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
			var err error
			clusters, err = tx.Clusters().List(ctx)
			return err
		}); err != nil {
			return err
		}
		for _, c := range clusters {
			labels = append(labels, c.Labels)
		}
	}
	rs, err := v1alpha1.OverrideRenderings(spec.Template, spec.Overrides, labels)
	if err != nil {
		// Validation refuses one override that does this alone; a set
		// that does it together lands here.
		return errInvalid("the overrides may not be applied: "+err.Error(), []v1alpha1.FieldError{{Field: "spec.overrides", Message: err.Error()}})
	}
	return s.admitRenderings(ctx, u, ns, false, rs)
}

// admitRenderings reviews each rendering as its writer will (Written),
// and answers the first refusal with a 422 (403 for a kind the policy
// refuses) naming its cause.
func (s *Server) admitRenderings(ctx context.Context, u policy.User, ns string, runnable bool, rs []v1alpha1.Rendering) error {
	if len(rs) == 0 {
		return nil
	}
	review := s.review(ctx, u, ns, runnable)
	for _, r := range rs {
		err := review.Written(r.Object, r.Cause)
		if err == nil {
			continue
		}
		var denied *admission.Denied
		if !errors.As(err, &denied) {
			return err
		}
		var apiErr *APIError
		if errors.As(denied.Err, &apiErr) {
			// A kind the policy refuses, which the rendering brought in.
			out := *apiErr
			out.Message = fmt.Sprintf("as %s renders the template: %s", r.Cause, apiErr.Message)
			return &out
		}
		var refusal *admission.Refusal
		if errors.As(denied.Err, &refusal) {
			err := refused(review, "the template as "+r.Cause+" renders it", refusal)
			var out *APIError
			if errors.As(err, &out) {
				out.Details = append([]v1alpha1.FieldError{{Field: r.Cause, Message: "renders an object that may not run: " + refusal.Error()}}, out.Details...)
			}
			return err
		}
		return &APIError{Code: http.StatusUnprocessableEntity, Reason: "Invalid", Message: denied.Error(),
			Details: []v1alpha1.FieldError{{Field: r.Cause, Message: denied.Err.Error()}}}
	}
	return nil
}
