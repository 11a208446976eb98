package server

import (
	"context"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

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
