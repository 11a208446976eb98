package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/kubeapi"
	"github.com/purser-io/purser/internal/domain/native"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// Placement policies say what a native object written to /k8s becomes
// (internal/domain/native). A namespace's (PlacementPolicy) is written
// by the namespace's editors and selects only that namespace's objects:
// it gives them nothing they could not give a runnable of their own. The
// farm's (ClusterPlacementPolicy) selects every namespace's, so only
// admins write it; anyone signed in may read it, since it decides where
// their objects go. Either way the runnable an object becomes is created
// by its writer through the runnables' own handler: the policy's spec is
// admitted as that user's.

// MaxPlacementPolicies bounds the policies of one namespace, and the
// farm's: each write of a native object reads those of its namespace and
// the farm's.
const MaxPlacementPolicies = 100

// policyScope is the namespace's policies (PlacementPolicy) or the
// farm's (ClusterPlacementPolicy).
type policyScope struct{ cluster bool }

func (p policyScope) kind() string {
	if p.cluster {
		return v1alpha1.KindClusterPlacementPolicy
	}
	return v1alpha1.KindPlacementPolicy
}

func (p policyScope) noun() string {
	if p.cluster {
		return "cluster placement policy"
	}
	return "placement policy"
}

// target is the request's namespace ("" for the farm's) and name.
func (p policyScope) target(r *http.Request) (string, string) {
	if p.cluster {
		return "", r.PathValue("name")
	}
	return r.PathValue("namespace"), r.PathValue("name")
}

func (p policyScope) ref(ns, name string) string {
	if p.cluster {
		return name
	}
	return ns + "/" + name
}

// mayWrite refuses who may not write the scope's policies in ns.
func (s *Server) mayWritePolicies(p policyScope, u policy.User, ns string) error {
	switch {
	case p.cluster && !s.policy().IsAdmin(u):
		return errForbidden("user %q may not write cluster placement policies; only admins may", u.Name)
	case !p.cluster && !s.policy().Allowed(u, ns, policy.VerbWrite):
		return errForbidden("user %q may not write placement policies in namespace %q", u.Name, ns)
	}
	return nil
}

// mayReadPolicies refuses who may not read the scope's policies in ns.
func (s *Server) mayReadPolicies(p policyScope, u policy.User, ns string) error {
	if !p.cluster && !s.policy().Allowed(u, ns, policy.VerbRead) {
		return errForbidden("user %q may not read namespace %q", u.Name, ns)
	}
	return nil
}

// putPlacementPolicy serves PUT: creates or replaces the policy. A body
// with metadata.resourceVersion is a precondition (409 when it moved);
// an unchanged spec writes nothing.
func (s *Server) putPlacementPolicy(p policyScope) apiHandler {
	return func(r *http.Request, u policy.User) (int, any, error) {
		ns, name := p.target(r)
		if err := s.mayWritePolicies(p, u, ns); err != nil {
			return 0, nil, err
		}
		obj, err := decodeBody(r, v1alpha1.DecodePlacementPolicy(p.kind()))
		if err != nil {
			return 0, nil, err
		}
		if p.cluster {
			if obj.Metadata.Name != "" && obj.Metadata.Name != name {
				return 0, nil, errInvalid("the body names another object than the URL",
					[]v1alpha1.FieldError{{Field: "metadata.name", Message: fmt.Sprintf("must match the URL's name %q", name)}})
			}
			obj.Metadata.Name = name
		} else if err := matchPath(&obj.Metadata, ns, name); err != nil {
			return 0, nil, err
		}
		if errs := v1alpha1.ValidatePlacementPolicy(obj, p.kind(), s.now()); len(errs) > 0 {
			return 0, nil, errInvalid(p.kind()+" is invalid", errs)
		}
		spec, err := json.Marshal(obj.Spec)
		if err != nil {
			return 0, nil, err
		}
		var rec *store.PlacementPolicy
		status := http.StatusOK
		err = s.tx(r.Context(), func(tx *store.Tx) error {
			status = http.StatusOK
			old, err := tx.PlacementPolicies().Get(r.Context(), ns, name)
			switch {
			case errors.Is(err, store.ErrNotFound):
				old = nil
			case err != nil:
				return err
			}
			if rv := obj.Metadata.ResourceVersion; rv != "" && (old == nil || rv != strconv.FormatInt(old.ResourceVersion, 10)) {
				if old == nil {
					return errNotFound("%s %s does not exist; drop metadata.resourceVersion to create it", p.noun(), p.ref(ns, name))
				}
				return errConflict("%s %s changed since resourceVersion %s; read it again and redo the change", p.noun(), p.ref(ns, name), rv)
			}
			if old != nil && bytes.Equal(old.Spec, spec) {
				rec = old
				return nil
			}
			action, outcome, verb := "update", "Updated", "changed"
			if old == nil {
				have, _, err := tx.PlacementPolicies().List(r.Context(), ns, "", MaxPlacementPolicies)
				if err != nil {
					return err
				}
				if len(have) >= MaxPlacementPolicies {
					where := "namespace " + ns + " has"
					if p.cluster {
						where = "the farm has"
					}
					return errInvalid(fmt.Sprintf("%s %d placement policies, the most it may have; remove one first", where, len(have)),
						[]v1alpha1.FieldError{{Field: "metadata.name", Message: fmt.Sprintf("a %d-th policy is one too many", len(have)+1)}})
				}
				rec = &store.PlacementPolicy{UID: uuid.NewString(), Namespace: ns, Name: name, Spec: spec}
				if err := tx.PlacementPolicies().Create(r.Context(), rec); err != nil {
					return err
				}
				status, action, outcome, verb = http.StatusCreated, "create", "Created", "created"
			} else {
				rec = old
				rec.Spec = spec
				if err := tx.PlacementPolicies().Update(r.Context(), rec); err != nil {
					return err
				}
			}
			return appendAudit(r.Context(), tx, u, action, p.kind(), ns, name,
				fmt.Sprintf("%s %s %s: it selects %s", verb, p.noun(), p.ref(ns, name), selectorsSummary(obj.Spec.ResourceSelectors)), outcome, obj.Spec)
		})
		if errors.Is(err, store.ErrConflict) {
			return 0, nil, errConflict("%s %s was written meanwhile; read it again and redo the change", p.noun(), p.ref(ns, name))
		}
		if err != nil {
			return 0, nil, err
		}
		out, err := placementPolicyFromRecord(p, rec)
		return status, out, err
	}
}

// selectorsSummary names what the selectors pick, for the audit log.
func selectorsSummary(sels []v1alpha1.ResourceSelector) string {
	parts := make([]string, 0, len(sels))
	for _, s := range sels {
		what := s.Kind + " (" + s.APIVersion + ")"
		switch {
		case s.Name != "":
			what += " named " + s.Name
		case s.LabelSelector != nil:
			what += " by labels"
		}
		parts = append(parts, what)
	}
	return strings.Join(parts, ", ")
}

func (s *Server) getPlacementPolicy(p policyScope) apiHandler {
	return func(r *http.Request, u policy.User) (int, any, error) {
		ns, name := p.target(r)
		if err := s.mayReadPolicies(p, u, ns); err != nil {
			return 0, nil, err
		}
		var rec *store.PlacementPolicy
		err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
			var err error
			rec, err = tx.PlacementPolicies().Get(r.Context(), ns, name)
			return err
		})
		if errors.Is(err, store.ErrNotFound) {
			return 0, nil, errNotFound("%s %s not found", p.noun(), p.ref(ns, name))
		}
		if err != nil {
			return 0, nil, err
		}
		out, err := placementPolicyFromRecord(p, rec)
		return http.StatusOK, out, err
	}
}

// listPlacementPolicies serves GET: a namespace's (?namespace=; every
// namespace's for who reads everywhere), or the farm's.
func (s *Server) listPlacementPolicies(p policyScope) apiHandler {
	return func(r *http.Request, u policy.User) (int, any, error) {
		q := r.URL.Query()
		ns := q.Get("namespace")
		if !p.cluster {
			if err := s.authorizeList(u, ns, "placement policies"); err != nil {
				return 0, nil, err
			}
		}
		limit, err := parseLimit(q.Get("limit"))
		if err != nil {
			return 0, nil, err
		}
		var recs []*store.PlacementPolicy
		var next string
		if err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
			if !p.cluster && ns == "" {
				recs, next, err = tx.PlacementPolicies().ListAllNamespaces(r.Context(), q.Get("continue"), limit)
			} else {
				recs, next, err = tx.PlacementPolicies().List(r.Context(), ns, q.Get("continue"), limit)
			}
			return err
		}); err != nil {
			return 0, nil, err
		}
		out := List[*v1alpha1.PlacementPolicy]{Items: make([]*v1alpha1.PlacementPolicy, 0, len(recs)), Continue: next}
		for _, rec := range recs {
			obj, err := placementPolicyFromRecord(p, rec)
			if err != nil {
				return 0, nil, err
			}
			out.Items = append(out.Items, obj)
		}
		return http.StatusOK, out, nil
	}
}

// deletePlacementPolicy serves DELETE: the policy goes; the runnables it
// placed stay, and a later write of their objects needs a policy again.
func (s *Server) deletePlacementPolicy(p policyScope) apiHandler {
	return func(r *http.Request, u policy.User) (int, any, error) {
		ns, name := p.target(r)
		if err := s.mayWritePolicies(p, u, ns); err != nil {
			return 0, nil, err
		}
		var rec *store.PlacementPolicy
		err := s.tx(r.Context(), func(tx *store.Tx) error {
			var err error
			if rec, err = tx.PlacementPolicies().Get(r.Context(), ns, name); err != nil {
				return err
			}
			if err := tx.PlacementPolicies().Delete(r.Context(), ns, name); err != nil {
				return err
			}
			return appendAudit(r.Context(), tx, u, "delete", p.kind(), ns, name,
				fmt.Sprintf("deleted %s %s; the runnables it placed stay", p.noun(), p.ref(ns, name)), "Removed", nil)
		})
		if errors.Is(err, store.ErrNotFound) {
			return 0, nil, errNotFound("%s %s not found", p.noun(), p.ref(ns, name))
		}
		if err != nil {
			return 0, nil, err
		}
		out, err := placementPolicyFromRecord(p, rec)
		return http.StatusOK, out, err
	}
}

func placementPolicyFromRecord(p policyScope, rec *store.PlacementPolicy) (*v1alpha1.PlacementPolicy, error) {
	out := &v1alpha1.PlacementPolicy{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: p.kind()},
		Metadata: v1alpha1.ObjectMeta{Name: rec.Name, Namespace: rec.Namespace, UID: rec.UID,
			ResourceVersion: strconv.FormatInt(rec.ResourceVersion, 10), CreationTimestamp: rec.CreatedAt},
	}
	if err := json.Unmarshal(rec.Spec, &out.Spec); err != nil {
		return nil, fmt.Errorf("%s %s: stored spec: %w", p.noun(), p.ref(rec.Namespace, rec.Name), err)
	}
	return out, nil
}

// placementPoliciesFor reads the policies that may select a native
// object of namespace ns, for /k8s (kubeapi.Policies).
func (s *Server) placementPoliciesFor(ctx context.Context, ns string) ([]native.Policy, error) {
	var recs []*store.PlacementPolicy
	if err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		recs, err = tx.PlacementPolicies().For(ctx, ns)
		return err
	}); err != nil {
		return nil, err
	}
	out := make([]native.Policy, 0, len(recs))
	for _, rec := range recs {
		p := native.Policy{Namespace: rec.Namespace, Name: rec.Name}
		if err := json.Unmarshal(rec.Spec, &p.Spec); err != nil {
			return nil, fmt.Errorf("placement policy %s: stored spec: %w", p.Ref(), err)
		}
		out = append(out, p)
	}
	return out, nil
}

// policyKind is the scope's policies as /k8s serves them.
func (s *Server) policyKind(p policyScope) kubeapi.OwnKind {
	k := kubeapi.OwnKind{Kind: p.kind(), Plural: strings.ToLower(strings.TrimSuffix(p.kind(), "y")) + "ies", Singular: strings.ToLower(p.kind()),
		Object: v1alpha1.PlacementPolicy{}, Namespaced: !p.cluster,
		Description: "PlacementPolicy says what the native objects it selects become when written to purser's Kubernetes API: a runnable of its spec.runnable, the object as its template.",
		Columns: []kubeapi.OwnColumn{
			{Name: "Priority", Type: "integer", Path: []string{"spec", "priority"}, Description: "The highest wins among the policies that select an object."},
		},
		Get: s.kubeHandler(s.getPlacementPolicy(p)), List: s.kubeHandler(s.listPlacementPolicies(p)),
		Update: s.kubeHandler(s.putPlacementPolicy(p)), Delete: s.kubeHandler(s.deletePlacementPolicy(p)),
		MayWrite: func(u policy.User, nsOrName string) error {
			if p.cluster {
				return s.mayWritePolicies(p, u, "")
			}
			return s.mayWritePolicies(p, u, nsOrName)
		},
		Identity: func(ctx context.Context, tx *store.Tx, ns, name string) (string, error) {
			if p.cluster {
				ns = ""
			}
			rec, err := tx.PlacementPolicies().Get(ctx, ns, name)
			if errors.Is(err, store.ErrNotFound) {
				return "", nil
			}
			if err != nil {
				return "", err
			}
			return rec.UID, nil
		},
	}
	if p.cluster {
		k.Description = "ClusterPlacementPolicy is a PlacementPolicy of the whole farm: it selects the native objects of every namespace; only admins write it."
	} else {
		k.MayRead = s.mayReadIn("placement policies")
	}
	return k
}
