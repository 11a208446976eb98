package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// keepPrevious runs in the transaction that replaces the live spec of
// rec, before rec is changed: see store.Deployables.KeepPrevious.
func keepPrevious(ctx context.Context, tx *store.Tx, rec *store.Deployable, next *v1alpha1.DeployableSpec) error {
	if next.Rollout == nil || rec.Generation == 0 {
		return nil
	}
	var old storedDeployable
	if err := json.Unmarshal(rec.Spec, &old); err != nil {
		return fmt.Errorf("deployable %s: stored spec: %w", rec.UID, err)
	}
	return tx.Deployables().KeepPrevious(ctx, rec, old.Spec.Rollout != nil)
}

func decodeRolloutStatus(b []byte) *v1alpha1.RolloutStatus {
	if len(b) == 0 {
		return nil
	}
	var st v1alpha1.RolloutStatus
	if json.Unmarshal(b, &st) != nil {
		return nil
	}
	return &st
}

// rolloutOf is status.rollout of a deployable: the syncer's latest
// decision, with the control people set, nil when there is none.
func rolloutOf(ctx context.Context, tx *store.Tx, rec *store.Deployable) (*v1alpha1.RolloutStatus, error) {
	r, err := tx.Deployables().GetRollout(ctx, rec.UID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := decodeRolloutStatus(r.Status)
	if ctl := decodeControl(r.Control, rec.Generation); st != nil && ctl.Generation == rec.Generation {
		st.Control = &ctl
	}
	return st, nil
}

func decodeControl(b []byte, gen int64) v1alpha1.RolloutControl {
	var ctl v1alpha1.RolloutControl
	if len(b) > 0 && json.Unmarshal(b, &ctl) == nil && ctl.Generation == gen {
		return ctl
	}
	return v1alpha1.RolloutControl{Generation: gen}
}

// rolloutAction is one of pause, resume and rollback.
type rolloutAction struct {
	verb string
	// apply changes the control, or says why it cannot (409).
	apply func(ctl *v1alpha1.RolloutControl, st *v1alpha1.RolloutStatus) error
}

var (
	pauseRollout = rolloutAction{"pause", func(ctl *v1alpha1.RolloutControl, st *v1alpha1.RolloutStatus) error {
		if st != nil && st.State == v1alpha1.RolloutComplete {
			return errConflict("the rollout of generation %d is complete; there is nothing to pause", ctl.Generation)
		}
		ctl.Paused = true
		return nil
	}}
	resumeRollout = rolloutAction{"resume", func(ctl *v1alpha1.RolloutControl, st *v1alpha1.RolloutStatus) error {
		ctl.Paused, ctl.Rollback = false, false
		if st != nil && (st.State == v1alpha1.RolloutHalted || st.State == v1alpha1.RolloutRolledBack) {
			ctl.Resumes = max(ctl.Resumes, st.ObservedResumes) + 1
		}
		return nil
	}}
	rollbackRollout = rolloutAction{"rollback", func(ctl *v1alpha1.RolloutControl, st *v1alpha1.RolloutStatus) error {
		ctl.Rollback = true
		return nil
	}}
)

// controlRollout serves POST .../pause, .../resume and .../rollback of a
// deployable that rolls out in waves. It is a write of the deployable: the
// same role is needed, and the change is audited with the control in the
// same transaction. The syncer acts on it at its next decision.
func (s *Server) controlRollout(a rolloutAction) apiHandler {
	return func(r *http.Request, u policy.User) (int, any, error) {
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		ref := "deployable " + ns + "/" + name
		if !s.policy().Allowed(u, ns, policy.VerbWrite) {
			return 0, nil, errForbidden("user %q may not change deployables in namespace %q", u.Name, ns)
		}
		var rec *store.Deployable
		err := s.tx(r.Context(), func(tx *store.Tx) error {
			var err error
			if rec, err = tx.Deployables().Get(r.Context(), ns, name); err != nil {
				return err
			}
			if rec.DeletedAt != nil {
				return store.ErrNotFound
			}
			var doc storedDeployable
			if err := json.Unmarshal(rec.Spec, &doc); err != nil {
				return fmt.Errorf("%s: stored spec: %w", ref, err)
			}
			if doc.Spec.Rollout == nil || rec.Generation == 0 {
				return errConflict("%s has no spec.rollout: every change reaches every cluster at once, with nothing to %s", ref, a.verb)
			}
			ro, err := tx.Deployables().GetRollout(r.Context(), rec.UID)
			if errors.Is(err, store.ErrNotFound) {
				ro, err = &store.DeployableRollout{DeployableUID: rec.UID}, nil
			}
			if err != nil {
				return err
			}
			st := decodeRolloutStatus(ro.Status)
			if st != nil && st.Generation != rec.Generation {
				st = nil
			}
			if a.verb == "rollback" && st == nil && ro.PreviousGeneration == 0 {
				return errConflict("%s keeps no previous generation to roll back to", ref)
			}
			ctl := decodeControl(ro.Control, rec.Generation)
			if err := a.apply(&ctl, st); err != nil {
				return err
			}
			if ro.Control, err = json.Marshal(ctl); err != nil {
				return err
			}
			if err := tx.Deployables().PutRollout(r.Context(), ro); err != nil {
				return err
			}
			summary := fmt.Sprintf("%s the rollout of %s generation %d", pastTense(a.verb), ns+"/"+name, rec.Generation)
			if a.verb == "rollback" {
				summary = fmt.Sprintf("asked to roll %s back from generation %d to %s", ns+"/"+name, rec.Generation, rollbackTarget(st, ro.PreviousGeneration))
			}
			return appendAudit(r.Context(), tx, u, "rollout-"+a.verb, v1alpha1.KindDeployable, ns, name, summary, "Accepted", ctl)
		})
		if errors.Is(err, store.ErrNotFound) {
			return 0, nil, errNotFound("%s not found", ref)
		}
		if err != nil {
			return 0, nil, err
		}
		return s.deployableResponse(r, http.StatusOK, rec)
	}
}

func pastTense(verb string) string {
	switch verb {
	case "pause":
		return "paused"
	case "resume":
		return "resumed"
	}
	return verb + "ed"
}

// approveWave serves POST .../approve?generation=G on a deployable whose
// rollout waits for an approver between waves: the existing approval
// flow, bound to the generation reviewed instead of a pending change. The
// approver needs the approver role and must not be the generation's
// author.
func (s *Server) approveWave(r *http.Request, u policy.User) (int, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	ref := "deployable " + ns + "/" + name
	if !s.policy().Allowed(u, ns, policy.VerbApprove) {
		return 0, nil, errForbidden("user %q is not an approver in namespace %q", u.Name, ns)
	}
	gen, err := strconv.ParseInt(r.URL.Query().Get("generation"), 10, 64)
	if err != nil || gen < 1 {
		return 0, nil, errBadRequest("generation must be a positive integer, as status.rollout.generation reads, got %q", r.URL.Query().Get("generation"))
	}
	var rec *store.Deployable
	err = s.tx(r.Context(), func(tx *store.Tx) error {
		var err error
		if rec, err = tx.Deployables().Get(r.Context(), ns, name); err != nil {
			return err
		}
		if rec.DeletedAt != nil {
			return store.ErrNotFound
		}
		if rec.Generation != gen {
			return errConflict("%s is at generation %d, not %d; read it again and review that generation", ref, rec.Generation, gen)
		}
		var doc storedDeployable
		if err := json.Unmarshal(rec.Spec, &doc); err != nil {
			return fmt.Errorf("%s: stored spec: %w", ref, err)
		}
		if author := userOf(doc.Author, ""); author.Name == u.Name {
			return errForbidden("user %q wrote generation %d of %s and cannot also approve its next wave; another approver must", u.Name, gen, ref)
		}
		ro, err := tx.Deployables().GetRollout(r.Context(), rec.UID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		var st *v1alpha1.RolloutStatus
		if ro != nil {
			st = decodeRolloutStatus(ro.Status)
		}
		if st == nil || st.Generation != gen || st.AwaitingApproval == "" {
			return errConflict("%s has no wave of generation %d waiting for approval", ref, gen)
		}
		ctl := decodeControl(ro.Control, gen)
		if !slices.Contains(ctl.Approved, st.AwaitingApproval) {
			ctl.Approved = append(ctl.Approved, st.AwaitingApproval)
		}
		if ro.Control, err = json.Marshal(ctl); err != nil {
			return err
		}
		if err := tx.Deployables().PutRollout(r.Context(), ro); err != nil {
			return err
		}
		return appendAudit(r.Context(), tx, u, "approve", v1alpha1.KindDeployable, ns, name,
			fmt.Sprintf("approved wave %s of %s generation %d", st.AwaitingApproval, ns+"/"+name, gen), "Approved", ctl)
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("%s not found", ref)
	}
	if err != nil {
		return 0, nil, err
	}
	return s.deployableResponse(r, http.StatusOK, rec)
}

// rollbackTarget says what a rollback returns the clusters to: each
// cluster's own fallback, as the latest decision names them.
func rollbackTarget(st *v1alpha1.RolloutStatus, previous int64) string {
	if st == nil || len(st.Clusters) == 0 {
		return v1alpha1.DescribeFallbacks([]int64{previous})
	}
	gens := make([]int64, 0, len(st.Clusters))
	for _, c := range st.Clusters {
		gens = append(gens, c.FallbackGeneration)
	}
	return v1alpha1.DescribeFallbacks(gens)
}
