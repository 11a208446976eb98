package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/google/uuid"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
)

// storedDeployable is the spec (and pending) column of a deployable. For a
// Secret, the template's data and stringData are not here: they are sealed
// in their own column.
type storedDeployable = store.Document[v1alpha1.DeployableSpec]

// sealedDeployable is a deployable split into what may be stored in clear
// and what is sealed, with a hash that changes when either changes.
type sealedDeployable struct {
	doc    []byte
	secret []byte // nil unless the template is a Secret
	hash   string
}

// sealDeployable removes a Secret's values from the template, and its
// overrides' patches (which carry values as the template does) from the
// overrides, leaving their shape (seal.RedactPatch); seals them; and
// computes the spec hash from the clear part and a keyed fingerprint of
// the values, so that the hash reveals nothing of them. An override
// cannot make a Secret of another kind (v1alpha1.IdentityFields), so the
// template's kind says whether there is anything to seal.
func (s *Server) sealDeployable(obj *v1alpha1.Deployable, author *store.Author) (sealedDeployable, error) {
	spec := obj.Spec
	var out sealedDeployable
	if templateKind(spec.Template) == "Secret" {
		inClear, plain, err := seal.SplitSecret(spec.Template)
		if err != nil {
			return out, err
		}
		spec.Template = inClear
		if len(spec.Overrides) > 0 {
			patches := make([]json.RawMessage, len(spec.Overrides))
			spec.Overrides = slices.Clone(spec.Overrides)
			for i, o := range spec.Overrides {
				patches[i] = o.Patch
				if spec.Overrides[i].Patch, err = seal.RedactPatch(o.Patch); err != nil {
					return out, fmt.Errorf("spec.overrides[%d].patch: %w", i, err)
				}
			}
			if plain, err = seal.SealPatches(plain, patches); err != nil {
				return out, err
			}
		}
		if out.secret, err = s.cfg.Sealer.Seal(plain, seal.SecretBinding(obj.Metadata.Namespace, obj.Metadata.Name)); err != nil {
			return out, err
		}
		out.hash = v1alpha1.SpecHash(spec) + "-" + s.cfg.Sealer.Fingerprint(plain)[:16]
	} else {
		out.hash = v1alpha1.SpecHash(spec)
	}
	var err error
	out.doc, err = json.Marshal(storedDeployable{Labels: obj.Metadata.Labels, Annotations: obj.Metadata.Annotations, Spec: spec, Author: author})
	return out, err
}

// deployableBody reads the deployable a request carries for the path's
// namespace and name, checked as every write of one is: decoded strictly,
// valid, the user allowed to write there, its template admitted.
func (s *Server) deployableBody(r *http.Request, u policy.User) (ns, name string, obj *v1alpha1.Deployable, err error) {
	ns, name = r.PathValue("namespace"), r.PathValue("name")
	obj, err = decodeBody(r, v1alpha1.DecodeDeployable)
	if err != nil {
		return "", "", nil, err
	}
	if err := matchPath(&obj.Metadata, ns, name); err != nil {
		return "", "", nil, err
	}
	if errs := v1alpha1.ValidateDeployable(obj); len(errs) > 0 {
		return "", "", nil, errInvalid("Deployable is invalid", errs)
	}
	if !s.policy().Allowed(u, ns, policy.VerbWrite) {
		return "", "", nil, errForbidden("user %q may not change deployables in namespace %q", u.Name, ns)
	}
	if err := s.admitDeployable(r.Context(), u, ns, &obj.Spec); err != nil {
		return "", "", nil, err
	}
	return ns, name, obj, nil
}

// putDeployable serves PUT: create (201) or update (200; generation + 1
// only when the spec changed). In a namespace that requires approval the
// change waits, and the live spec stays as it was until it is approved.
func (s *Server) putDeployable(r *http.Request, u policy.User) (int, any, error) {
	ns, name, obj, err := s.deployableBody(r, u)
	if err != nil {
		return 0, nil, err
	}
	sealed, err := s.sealDeployable(obj, authorOf(u))
	if err != nil {
		return 0, nil, err
	}
	needsApproval := s.policy().ApprovalRequired(ns, v1alpha1.KindDeployable)
	kind := templateKind(obj.Spec.Template)
	// Audit details carry the spec without Secret values.
	var details storedDeployable
	if err := json.Unmarshal(sealed.doc, &details); err != nil {
		return 0, nil, fmt.Errorf("decode the deployable to store: %w", err)
	}

	var rec *store.Deployable
	status := http.StatusOK
	put := func(tx *store.Tx) error {
		status = http.StatusOK
		revive := false
		var err error
		rec, err = tx.Deployables().Get(r.Context(), ns, name)
		create := errors.Is(err, store.ErrNotFound)
		if err != nil && !create {
			return err
		}
		if create {
			status = http.StatusCreated
			rec = &store.Deployable{Namespace: ns, Name: name, UID: uuid.NewString(), Spec: []byte("{}")}
		} else if rec.DeletedAt != nil && !needsApproval {
			// Still being removed from clusters: revive it instead. Where
			// changes need approval, the revive is a pending change like
			// any other, and the deletion goes on until it is approved.
			rec.DeletedAt = nil
		} else if rec.DeletedAt != nil {
			revive = true
		} else if !needsApproval && rec.SpecHash == sealed.hash && rec.Pending == nil && !rec.PendingDelete {
			return nil // nothing changes: nothing to audit
		}
		action, outcome := "update", "Active"
		if create {
			action = "create"
		}
		if needsApproval {
			rec.Pending, rec.PendingSecret, rec.PendingBy, rec.PendingDelete = sealed.doc, sealed.secret, u.Name, false
			outcome = string(v1alpha1.PhasePendingApproval)
		} else {
			if err := keepPrevious(r.Context(), tx, rec, &obj.Spec); err != nil {
				return err
			}
			rec.Spec, rec.Secret, rec.SpecHash = sealed.doc, sealed.secret, sealed.hash
			rec.Generation++
			rec.Pending, rec.PendingSecret, rec.PendingBy, rec.PendingDelete = nil, nil, "", false
		}
		if create {
			err = tx.Deployables().Create(r.Context(), rec)
		} else {
			err = tx.Deployables().Update(r.Context(), rec)
		}
		if errors.Is(err, store.ErrConflict) {
			return errWrittenMeanwhile
		}
		if err != nil {
			return err
		}
		summary := fmt.Sprintf("%sd %s %s", action, kind, ns+"/"+name)
		if revive {
			summary = fmt.Sprintf("asked to revive %s %s, deleted and still being removed", kind, ns+"/"+name)
		}
		if needsApproval {
			summary += "; waits for approval"
		} else {
			summary += fmt.Sprintf(" (generation %d)", rec.Generation)
		}
		return appendAudit(r.Context(), tx, u, action, v1alpha1.KindDeployable, ns, name, summary, outcome, details.Spec)
	}
	err = s.tx(r.Context(), func(tx *store.Tx) error {
		// Created or changed by another request since it was read (the
		// same PUT sent again, on PostgreSQL, while the first was being
		// committed): that one has committed, and this one applies on top
		// of it; the same spec again then changes nothing.
		if err := put(tx); !errors.Is(err, errWrittenMeanwhile) {
			return err
		}
		return put(tx)
	})
	if err != nil {
		return 0, nil, err
	}
	return s.deployableResponse(r, status, rec)
}

// errWrittenMeanwhile: an object found missing was created, or one read
// was changed, by another request before this one could write it.
var errWrittenMeanwhile = errors.New("written concurrently")

// matchPath fills an object's namespace and name from the URL, and rejects
// a body that names another object.
func matchPath(m *v1alpha1.ObjectMeta, ns, name string) error {
	var errs []v1alpha1.FieldError
	if m.Namespace == "" {
		m.Namespace = ns
	} else if m.Namespace != ns {
		errs = append(errs, v1alpha1.FieldError{Field: "metadata.namespace", Message: fmt.Sprintf("must match the URL's namespace %q", ns)})
	}
	if m.Name == "" {
		m.Name = name
	} else if m.Name != name {
		errs = append(errs, v1alpha1.FieldError{Field: "metadata.name", Message: fmt.Sprintf("must match the URL's name %q", name)})
	}
	if len(errs) > 0 {
		return errInvalid("the body names another object than the URL", errs)
	}
	return nil
}

func (s *Server) getDeployable(r *http.Request, u policy.User) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.policy().Allowed(u, ns, policy.VerbRead) {
		return 0, nil, errForbidden("user %q may not read namespace %q", u.Name, ns)
	}
	var rec *store.Deployable
	err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		rec, err = tx.Deployables().Get(r.Context(), ns, name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) || (err == nil && !visible(rec)) {
		return 0, nil, errNotFound("deployable %s/%s not found", ns, name)
	}
	if err != nil {
		return 0, nil, err
	}
	return s.deployableResponse(r, http.StatusOK, rec)
}

// visible reports whether the API shows a deployable: not deleted, or
// deleted with a revive waiting for approval, which approvers must be
// able to read.
func visible(rec *store.Deployable) bool { return rec.DeletedAt == nil || rec.Pending != nil }

func (s *Server) deployableResponse(r *http.Request, status int, rec *store.Deployable) (int, any, error) {
	var (
		clusters []*store.DeployableClusterStatus
		ro       *v1alpha1.RolloutStatus
	)
	if err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		if clusters, err = tx.Deployables().ListStatus(r.Context(), rec.UID); err != nil {
			return err
		}
		ro, err = rolloutOf(r.Context(), tx, rec)
		return err
	}); err != nil {
		return 0, nil, err
	}
	out, err := deployableFromRecord(rec, clusters)
	if out != nil {
		out.Status.Rollout = ro
		out.Status.Conditions = v1alpha1.DeployableConditions(out)
	}
	return status, out, err
}

func (s *Server) listDeployables(r *http.Request, u policy.User) (int, any, error) {
	q := r.URL.Query()
	// Tombstones too, for those with a revive waiting for approval; the
	// others are skipped below.
	f := store.DeployableFilter{Namespace: q.Get("namespace"), Continue: q.Get("continue"), IncludeDeleted: true}
	if err := s.authorizeList(u, f.Namespace, "deployables"); err != nil {
		return 0, nil, err
	}
	var err error
	if f.Limit, err = parseLimit(q.Get("limit")); err != nil {
		return 0, nil, err
	}
	out := List[*v1alpha1.Deployable]{Items: []*v1alpha1.Deployable{}}
	err = s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		out.Items = out.Items[:0]
		recs, next, err := tx.Deployables().List(r.Context(), f)
		if err != nil {
			return err
		}
		out.Continue = next
		for _, rec := range recs {
			if !visible(rec) {
				continue
			}
			clusters, err := tx.Deployables().ListStatus(r.Context(), rec.UID)
			if err != nil {
				return err
			}
			obj, err := deployableFromRecord(rec, clusters)
			if err != nil {
				return err
			}
			if obj.Status.Rollout, err = rolloutOf(r.Context(), tx, rec); err != nil {
				return err
			}
			obj.Status.Conditions = v1alpha1.DeployableConditions(obj)
			out.Items = append(out.Items, obj)
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, out, nil
}

// deleteDeployable marks a deployable deleted; the syncer removes it from
// every cluster and then purges the row. With approval required, the
// deletion waits for an approver.
func (s *Server) deleteDeployable(r *http.Request, u policy.User) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.policy().Allowed(u, ns, policy.VerbWrite) {
		return 0, nil, errForbidden("user %q may not delete deployables in namespace %q", u.Name, ns)
	}
	needsApproval := s.policy().ApprovalRequired(ns, v1alpha1.KindDeployable)
	var rec *store.Deployable
	withdrawn := false
	err := s.tx(r.Context(), func(tx *store.Tx) error {
		withdrawn = false
		var err error
		if rec, err = tx.Deployables().Get(r.Context(), ns, name); err != nil {
			return err
		}
		if rec.DeletedAt != nil && rec.Pending == nil {
			return store.ErrNotFound
		}
		if rec.DeletedAt != nil {
			// Deleted, with a revive waiting for approval: deleting it
			// again withdraws the revive, back to the deletion that was
			// decided.
			rec.Pending, rec.PendingSecret, rec.PendingBy, rec.PendingDelete = nil, nil, "", false
			if err := tx.Deployables().Update(r.Context(), rec); err != nil {
				return err
			}
			withdrawn = true
			return appendAudit(r.Context(), tx, u, "delete", v1alpha1.KindDeployable, ns, name,
				"withdrew the revive of "+ns+"/"+name+", which stays deleted", "Deleted", nil)
		}
		summary, outcome := "deleted "+ns+"/"+name+"; it is removed from every cluster", "Deleted"
		if needsApproval {
			rec.Pending, rec.PendingSecret, rec.PendingBy, rec.PendingDelete = nil, nil, u.Name, true
			summary, outcome = "asked to delete "+ns+"/"+name+"; waits for approval", string(v1alpha1.PhasePendingApproval)
		} else {
			now := s.now().UTC()
			rec.DeletedAt = &now
		}
		if err := tx.Deployables().Update(r.Context(), rec); err != nil {
			return err
		}
		return appendAudit(r.Context(), tx, u, "delete", v1alpha1.KindDeployable, ns, name, summary, outcome, nil)
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("deployable %s/%s not found", ns, name)
	}
	if err != nil {
		return 0, nil, err
	}
	if withdrawn {
		return http.StatusOK, map[string]string{"status": "the revive was withdrawn; the deployable stays deleted"}, nil
	}
	return s.deployableResponse(r, http.StatusOK, rec)
}

// decideDeployable serves approve and reject of a deployable's pending
// change, by an approver who did not make it, bound to the version of the
// change the approver reviewed (?resourceVersion=). An approved change is
// authorized again for its author under the policy as it is now.
func (s *Server) decideDeployable(approve bool) apiHandler {
	return func(r *http.Request, u policy.User) (int, any, error) {
		if approve && r.URL.Query().Has("generation") {
			return s.approveWave(r, u) // a wave of a rollout, not a pending change
		}
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		ref := "deployable " + ns + "/" + name
		if !s.policy().Allowed(u, ns, policy.VerbApprove) {
			return 0, nil, errForbidden("user %q is not an approver in namespace %q", u.Name, ns)
		}
		reviewed, err := pendingVersion(r, "deployable")
		if err != nil {
			return 0, nil, err
		}
		// The change as reviewed: the transaction below acts only if the
		// row is still at that version.
		var rec *store.Deployable
		if err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
			var err error
			rec, err = tx.Deployables().Get(r.Context(), ns, name)
			return err
		}); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return 0, nil, errNotFound("%s not found", ref)
			}
			return 0, nil, err
		}
		if rec.Pending == nil && !rec.PendingDelete {
			return 0, nil, errConflict("%s has no change waiting for approval", ref)
		}
		if err := checkReviewedObject(r, rec.UID, ref); err != nil {
			return 0, nil, err
		}
		if err := checkPendingVersion(reviewed, rec.ResourceVersion, ref); err != nil {
			return 0, nil, err
		}
		if rec.PendingBy == u.Name {
			return 0, nil, errForbidden("user %q made the pending change to %s and cannot also decide on it; another approver must", u.Name, ref)
		}
		if approve && rec.Pending != nil {
			var doc storedDeployable
			if err := json.Unmarshal(rec.Pending, &doc); err != nil {
				return 0, nil, fmt.Errorf("%s: pending spec: %w", ref, err)
			}
			if err := s.authorizeAuthor(userOf(doc.Author, rec.PendingBy), ns, "the pending change to "+ref, func(author policy.User) error {
				return s.admitDeployable(r.Context(), author, ns, &doc.Spec)
			}); err != nil {
				return 0, nil, err
			}
		}
		purged := false
		err = s.tx(r.Context(), func(tx *store.Tx) error {
			purged = false
			var err error
			if rec, err = tx.Deployables().Get(r.Context(), ns, name); err != nil {
				return err
			}
			if err := checkPendingVersion(reviewed, rec.ResourceVersion, ref); err != nil {
				return err
			}
			by := rec.PendingBy
			action, outcome := "reject", "Rejected"
			switch {
			case approve && rec.PendingDelete:
				now := s.now().UTC()
				rec.DeletedAt = &now
				action, outcome = "approve", "Deleted"
			case approve:
				hash, err := s.pendingHash(rec)
				if err != nil {
					return err
				}
				var next storedDeployable
				if err := json.Unmarshal(rec.Pending, &next); err != nil {
					return fmt.Errorf("%s: pending spec: %w", ref, err)
				}
				if err := keepPrevious(r.Context(), tx, rec, &next.Spec); err != nil {
					return err
				}
				// The live spec says who approved it, and as which
				// generation (status.approvedBy, approvedGeneration).
				next.Approval = &store.Approval{By: u.Name, Generation: rec.Generation + 1, At: s.now().UTC()}
				live, err := json.Marshal(next)
				if err != nil {
					return err
				}
				rec.Spec, rec.Secret, rec.SpecHash = live, rec.PendingSecret, hash
				rec.Generation++
				rec.DeletedAt = nil // a revive brings it back
				action, outcome = "approve", "Active"
			}
			rec.Pending, rec.PendingSecret, rec.PendingBy, rec.PendingDelete = nil, nil, "", false
			if !approve && rec.Generation == 0 {
				// Rejected before it was ever live: nothing to keep.
				if err := tx.Deployables().Purge(r.Context(), rec.UID); err != nil {
					return err
				}
				purged = true
			} else if err := tx.Deployables().Update(r.Context(), rec); err != nil {
				return err
			}
			return appendAudit(r.Context(), tx, u, action, v1alpha1.KindDeployable, ns, name,
				fmt.Sprintf("%sd the change to %s made by %s (resourceVersion %d)", action, ns+"/"+name, by, reviewed), outcome, nil)
		})
		if errors.Is(err, store.ErrNotFound) {
			return 0, nil, errNotFound("%s not found", ref)
		}
		if err != nil {
			return 0, nil, err
		}
		if purged {
			return http.StatusOK, map[string]string{"status": "rejected; the deployable was never live and is gone"}, nil
		}
		if rec.DeletedAt != nil && !approve {
			return http.StatusOK, map[string]string{"status": "rejected; the deployable stays deleted and is being removed from every cluster"}, nil
		}
		return s.deployableResponse(r, http.StatusOK, rec)
	}
}

// pendingHash computes the spec hash of a pending change the way
// sealDeployable does for a live one.
func (s *Server) pendingHash(rec *store.Deployable) (string, error) {
	var doc storedDeployable
	if err := json.Unmarshal(rec.Pending, &doc); err != nil {
		return "", fmt.Errorf("deployable %s: pending spec: %w", rec.UID, err)
	}
	if rec.PendingSecret == nil {
		return v1alpha1.SpecHash(doc.Spec), nil
	}
	plain, err := s.cfg.Sealer.Open(rec.PendingSecret, seal.SecretBinding(rec.Namespace, rec.Name))
	if err != nil {
		return "", fmt.Errorf("deployable %s: %w", rec.UID, err)
	}
	return v1alpha1.SpecHash(doc.Spec) + "-" + s.cfg.Sealer.Fingerprint(plain)[:16], nil
}

// deployableFromRecord builds the API object; Secret values are never in
// it, since the stored spec does not hold them.
func deployableFromRecord(rec *store.Deployable, clusters []*store.DeployableClusterStatus) (*v1alpha1.Deployable, error) {
	src := rec.Spec
	if rec.Generation == 0 && rec.Pending != nil {
		src = rec.Pending // never live yet: show what waits for approval
	}
	var doc storedDeployable
	if err := json.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("deployable %s: stored spec: %w", rec.UID, err)
	}
	st := v1alpha1.DeployableStatus{Generation: rec.Generation, Phase: v1alpha1.PhaseActive}
	if a := doc.Approval; a != nil {
		st.ApprovedBy, st.ApprovedGeneration = a.By, a.Generation
	}
	if rec.Pending != nil || rec.PendingDelete {
		st.Phase = v1alpha1.PhasePendingApproval
		pc := &v1alpha1.PendingChange[v1alpha1.DeployableSpec]{
			ResourceVersion: strconv.FormatInt(rec.ResourceVersion, 10), Delete: rec.PendingDelete,
			Revive: rec.DeletedAt != nil, Author: rec.PendingBy, Time: rec.UpdatedAt,
		}
		if rec.Pending != nil {
			pc.Generation = rec.Generation + 1
			var pending storedDeployable
			if err := json.Unmarshal(rec.Pending, &pending); err != nil {
				return nil, fmt.Errorf("deployable %s: pending spec: %w", rec.UID, err)
			}
			pc.Spec = &pending.Spec
		}
		st.PendingChange = pc
	}
	for _, c := range clusters {
		st.Clusters = append(st.Clusters, v1alpha1.DeployableClusterStatus{
			Cluster: c.Cluster, State: v1alpha1.SyncState(c.State), SyncedGeneration: c.SyncedGeneration,
			LastSyncedAt: c.LastSyncedAt, Message: c.Message, Reason: c.Reason,
		})
	}
	return &v1alpha1.Deployable{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindDeployable},
		Metadata: storedMeta(&doc, rec.Name, rec.Namespace, rec.UID, rec.Generation, rec.ResourceVersion, rec.CreatedAt),
		Spec:     doc.Spec,
		Status:   st,
	}, nil
}
