package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// Quotas bound what a namespace's runnables hold across the farm. Only
// admins set them, as they register clusters: a tenant's quota is what
// keeps it within its share, so it is not the tenant's to raise. Anyone
// who may read the namespace may read its quota and usage.

// putQuota serves PUT /api/v1/quotas/{namespace}: creates or replaces the
// namespace's quota. A body with metadata.resourceVersion is a
// precondition (409 when it moved). Unchanged limits write nothing.
func (s *Server) putQuota(r *http.Request, u policy.User) (int, any, error) {
	ns := r.PathValue("namespace")
	if !s.policy().IsAdmin(u) {
		return 0, nil, errForbidden("user %q may not set quotas; only admins may", u.Name)
	}
	obj, err := decodeBody(r, v1alpha1.DecodeQuota)
	if err != nil {
		return 0, nil, err
	}
	if errs := v1alpha1.ValidateQuota(obj, ns); len(errs) > 0 {
		return 0, nil, errInvalid("Quota is invalid", errs)
	}
	spec, err := json.Marshal(obj.Spec)
	if err != nil {
		return 0, nil, err
	}
	var rec *store.Quota
	status := http.StatusOK
	err = s.tx(r.Context(), func(tx *store.Tx) error {
		old, err := tx.Quotas().Get(r.Context(), ns)
		switch {
		case errors.Is(err, store.ErrNotFound):
			old = nil
		case err != nil:
			return err
		}
		if rv := obj.Metadata.ResourceVersion; rv != "" && (old == nil || rv != strconv.FormatInt(old.ResourceVersion, 10)) {
			return errConflict("quota %s changed since resourceVersion %s; read it again and redo the change", ns, rv)
		}
		if old != nil && bytes.Equal(old.Spec, spec) {
			rec = old
			return nil
		}
		rec = &store.Quota{Namespace: ns, Spec: spec}
		action, outcome := "create", "Created"
		if old != nil {
			rec.ResourceVersion, action, outcome = old.ResourceVersion, "update", "Updated"
		} else {
			status = http.StatusCreated
		}
		if err := tx.Quotas().Put(r.Context(), rec); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return errConflict("quota %s was written meanwhile; read it again and redo the change", ns)
			}
			return err
		}
		return appendAudit(r.Context(), tx, u, action, v1alpha1.KindQuota, ns, ns,
			fmt.Sprintf("set the quota of namespace %s: %s", ns, formatLimits(obj.Spec.Limits)), outcome, obj.Spec)
	})
	if err != nil {
		return 0, nil, err
	}
	out, err := s.quotaResponse(r, rec)
	return status, out, err
}

// getQuota serves GET /api/v1/quotas/{namespace}, with status.used.
func (s *Server) getQuota(r *http.Request, u policy.User) (int, any, error) {
	ns := r.PathValue("namespace")
	if !s.policy().Allowed(u, ns, policy.VerbRead) {
		return 0, nil, errForbidden("user %q may not read namespace %q", u.Name, ns)
	}
	var rec *store.Quota
	err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		rec, err = tx.Quotas().Get(r.Context(), ns)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("namespace %s has no quota", ns)
	}
	if err != nil {
		return 0, nil, err
	}
	out, err := s.quotaResponse(r, rec)
	return http.StatusOK, out, err
}

// listQuotas serves GET /api/v1/quotas: those of the namespaces the user
// may read.
func (s *Server) listQuotas(r *http.Request, u policy.User) (int, any, error) {
	var recs []*store.Quota
	err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		recs, err = tx.Quotas().List(r.Context())
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	items := []*v1alpha1.Quota{}
	for _, rec := range recs {
		if !s.policy().Allowed(u, rec.Namespace, policy.VerbRead) {
			continue
		}
		q, err := s.quotaResponse(r, rec)
		if err != nil {
			return 0, nil, err
		}
		items = append(items, q)
	}
	return http.StatusOK, map[string]any{"apiVersion": v1alpha1.GroupVersion, "kind": "QuotaList", "items": items}, nil
}

// deleteQuota serves DELETE /api/v1/quotas/{namespace}: the namespace is
// no longer bounded.
func (s *Server) deleteQuota(r *http.Request, u policy.User) (int, any, error) {
	ns := r.PathValue("namespace")
	if !s.policy().IsAdmin(u) {
		return 0, nil, errForbidden("user %q may not remove quotas; only admins may", u.Name)
	}
	var rec *store.Quota
	err := s.tx(r.Context(), func(tx *store.Tx) error {
		var err error
		if rec, err = tx.Quotas().Get(r.Context(), ns); err != nil {
			return err
		}
		if err := tx.Quotas().Delete(r.Context(), ns); err != nil {
			return err
		}
		return appendAudit(r.Context(), tx, u, "delete", v1alpha1.KindQuota, ns, ns,
			fmt.Sprintf("removed the quota of namespace %s", ns), "Deleted", nil)
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("namespace %s has no quota", ns)
	}
	if err != nil {
		return 0, nil, err
	}
	out, err := s.quotaResponse(r, rec)
	return http.StatusOK, out, err
}

// quotaResponse is the stored quota with what its namespace uses now.
func (s *Server) quotaResponse(r *http.Request, rec *store.Quota) (*v1alpha1.Quota, error) {
	q := &v1alpha1.Quota{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindQuota},
		Metadata: v1alpha1.ObjectMeta{Name: rec.Namespace, ResourceVersion: strconv.FormatInt(rec.ResourceVersion, 10),
			CreationTimestamp: rec.CreatedAt},
	}
	if err := json.Unmarshal(rec.Spec, &q.Spec); err != nil {
		return nil, fmt.Errorf("quota of %s: stored spec: %w", rec.Namespace, err)
	}
	var byCluster map[string][][]byte
	var clusters []*store.Cluster
	if err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		if byCluster, err = tx.Runnables().ActiveStatusesByCluster(r.Context(), rec.Namespace); err != nil || q.Spec.PerLabel == nil {
			return err
		}
		clusters, err = tx.Clusters().List(r.Context())
		return err
	}); err != nil {
		return nil, err
	}
	var statuses [][]byte
	for _, sts := range byCluster {
		statuses = append(statuses, sts...)
	}
	used := placement.Strings(placement.StoredUsage(statuses))
	if pl := q.Spec.PerLabel; pl != nil {
		labels := map[string]map[string]string{}
		for _, c := range clusters {
			labels[c.Name] = c.Labels
		}
		// Usage beside each limit, for every value a cluster carries.
		q.Status.UsedPerLabel = map[string]map[string]string{}
		for _, c := range clusters {
			if v, ok := c.Labels[pl.Label]; ok {
				q.Status.UsedPerLabel[v] = limitsUsed(pl.Limits, nil)
			}
		}
		for v, u := range placement.StoredUsageByLabel(byCluster, func(cluster string) (string, bool) {
			v, ok := labels[cluster][pl.Label]
			return v, ok
		}) {
			q.Status.UsedPerLabel[v] = limitsUsed(pl.Limits, placement.Strings(u))
		}
	}
	q.Status.Used = limitsUsed(q.Spec.Limits, used)
	return q, nil
}

// limitsUsed is usage beside each limit: every limit has a figure, 0 when
// unused.
func limitsUsed(limits, used map[string]string) map[string]string {
	out := make(map[string]string, len(limits))
	for name := range limits {
		out[name] = "0"
		if u, ok := used[name]; ok {
			out[name] = u
		}
	}
	return out
}

func formatLimits(l map[string]string) string {
	return formatLabels(l)
}
