package failover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/kinds"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// resume undoes what a cluster's agent did to the runnable's object when
// its lease expired (status.fenced), now that the cluster is Ready again
// and the runnable was not moved meanwhile, by the merge patch of spec its
// kind's driver gives (kinds.Fencer's Unfence: a Job gets back the suspend
// of its template, a FlinkDeployment its job state). The patch names the
// object's uid, so it never touches a later object of the same name. A
// kind the agent fences by deletion is created again (recreate).
func (c *Controller) resume(ctx context.Context, rec *store.Runnable, r *runnable, view *clusterView) error {
	gvk, err := r.gvk()
	if err != nil {
		return err
	}
	var attempts []*store.Attempt
	if err := c.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		attempts, err = tx.Attempts().List(ctx, rec.UID)
		return err
	}); err != nil {
		return err
	}
	n := len(attempts)
	if n == 0 || attempts[n-1].EndedAt != nil || attempts[n-1].Cluster != rec.Cluster || attempts[n-1].ObjectUID == "" {
		return nil
	}
	spec, ok := kinds.Default().Unfence(gvk.GroupKind(), r.doc.Spec.Template)
	if !ok {
		// Its agent fences this kind by deleting it (after marking it
		// fenced, which is how status.fenced came to be set).
		return c.recreate(ctx, rec, attempts[n-1].Number, gvk.Kind)
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"uid":         attempts[n-1].ObjectUID,
			"annotations": map[string]any{v1alpha1.AnnotationFenced: nil},
		},
		"spec": spec,
	})
	if err != nil {
		return err
	}
	cl, err := c.cfg.Objects.Get(view.row)
	if err != nil {
		return err
	}
	name := v1alpha1.ObjectName(r.doc.Spec.Template, rec.Name)
	rctx, cancel := context.WithTimeout(ctx, removeTimeout)
	defer cancel()
	if err := cl.MergePatch(rctx, gvk, rec.Namespace, name, patch); err != nil {
		return fmt.Errorf("resume %s %s/%s on %s: %w", gvk.Kind, rec.Namespace, name, rec.Cluster, err)
	}
	msg := fmt.Sprintf("resumed %s %s/%s on %s, which its agent had suspended when its lease expired; the cluster is Ready again and the runnable was not moved",
		gvk.Kind, rec.Namespace, name, rec.Cluster)
	c.log.Info("resumed a fenced object", "runnable", rec.Namespace+"/"+rec.Name, "cluster", rec.Cluster)
	// The patch is done: record it against the runnable as it is now,
	// since the ingester may well have moved it on meanwhile (the Job
	// reports that it runs again), and a resume must not go unaudited.
	attempt := attempts[n-1].Number
	err = c.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		cur, err := lifecycle.Load(ctx, tx, rec.UID)
		if err != nil {
			return err
		}
		latest, err := tx.Attempts().List(ctx, rec.UID)
		if err != nil {
			return err
		}
		if k := len(latest); k == 0 || latest[k-1].Number != attempt || latest[k-1].EndedAt != nil {
			return store.ErrMoved // moved away meanwhile: the resume was of a copy being left
		}
		_, err = lifecycle.Apply(ctx, tx, cur, lifecycle.Transition{
			To: cur.Phase(), By: lifecycle.ByController, Message: msg,
			Edit:  func(st *v1alpha1.RunnableStatus) error { st.Fenced = false; return nil },
			Audit: &audit.Entry{Action: "resume", Summary: msg},
		})
		return err
	})
	if errors.Is(err, store.ErrMoved) || errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// recreate has the object of attempt number, which its agent deleted when
// its lease expired (a kind with no suspend of its own), created again
// from the runnable's template, now that its cluster is Ready and the
// runnable did not move: the runnable goes back to Scheduled on the same
// attempt and the submitter creates the object as it did the first time,
// through its one writer and the admission of what it writes. Only once
// the inventory holds no object of that attempt there: one still being
// deleted would be taken for the new one.
func (c *Controller) recreate(ctx context.Context, rec *store.Runnable, number int, kind string) error {
	msg := fmt.Sprintf("%s of attempt %d on %s was deleted by its agent when its lease expired; the cluster is Ready again and the runnable was not moved, so it is created again from its template",
		kind, number, rec.Cluster)
	var recreated bool
	err := c.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		recreated = false
		cur, err := lifecycle.Load(ctx, tx, rec.UID)
		if err != nil {
			return err
		}
		latest, err := tx.Attempts().List(ctx, rec.UID)
		if err != nil {
			return err
		}
		k := len(latest)
		if k == 0 || latest[k-1].Number != number || latest[k-1].EndedAt != nil || !cur.Status.Fenced {
			return store.ErrMoved // moved, or resumed, meanwhile
		}
		sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelRunnableUID: rec.UID, v1alpha1.LabelAttempt: strconv.Itoa(number)})
		rows, _, err := tx.Inventory().List(ctx, store.InventoryFilter{Cluster: rec.Cluster, Namespace: rec.Namespace,
			Selector: sel, WithoutObject: true, Limit: 1})
		if err != nil {
			return err
		}
		if len(rows) > 0 {
			return nil // not gone yet (or its deletion not reported yet): the next pass looks again
		}
		_, err = lifecycle.Apply(ctx, tx, cur, lifecycle.Transition{
			To: v1alpha1.PhaseScheduled, By: lifecycle.ByController, Message: msg,
			Edit: func(st *v1alpha1.RunnableStatus) error {
				st.Fenced, st.Health, st.UnhealthySince = false, v1alpha1.HealthUnknown, nil
				return nil
			},
			Audit:   &audit.Entry{Action: "recreate", Summary: msg},
			Enqueue: stream.SubmissionSubmit, EnqueueAttempt: number,
		})
		recreated = err == nil
		return err
	})
	if errors.Is(err, store.ErrMoved) || errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if recreated {
		c.log.Info("a fenced object deleted by its agent is created again", "runnable", rec.Namespace+"/"+rec.Name, "cluster", rec.Cluster)
		c.notify()
	}
	return err
}
