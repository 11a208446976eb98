package failover

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/lifecycle"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
)

// retain removes the ended runnables whose retention has passed
// (spec.ttlSecondsAfterFinished), oldest first, a page per pass.
func (c *Controller) retain(ctx context.Context) error {
	var due []*store.Runnable
	if err := c.cfg.Store.Read(ctx, func(tx *store.Tx) (err error) {
		due, err = tx.Runnables().ListToRemove(ctx, c.cfg.Now(), pageSize)
		return err
	}); err != nil {
		return err
	}
	var errs []error
	for _, rec := range due {
		r, err := lifecycle.Decode(rec)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		summary := fmt.Sprintf("removed %s/%s, which ended %s at %s, once its retention had passed", rec.Namespace, rec.Name,
			rec.Phase, rec.EndedAt.UTC().Format("2006-01-02T15:04:05Z"))
		err = c.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
			return lifecycle.Remove(ctx, tx, r, lifecycle.ByRetention, "", audit.Entry{Action: "expire", Summary: summary})
		})
		switch {
		case err == nil:
			c.metrics.retained.Inc()
			c.log.Info("removed an ended runnable past its retention", "runnable", rec.Namespace+"/"+rec.Name)
		case errors.Is(err, store.ErrMoved) || errors.Is(err, store.ErrNotFound):
		default:
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeLeftovers deletes from their clusters the objects that attempts of
// removed runnables left there, then forgets them. A cluster that does not
// answer keeps its leftovers until it does; one that was removed from
// purser takes them with it.
func (c *Controller) removeLeftovers(ctx context.Context, views map[string]*clusterView) error {
	var copies []*store.LeftoverCopy
	if err := c.cfg.Store.Read(ctx, func(tx *store.Tx) (err error) {
		copies, err = tx.LeftoverCopies().List(ctx, 1000)
		return err
	}); err != nil {
		return err
	}
	failed := map[string]bool{}
	var errs []error
	for _, lc := range copies {
		view := views[lc.Cluster]
		if view != nil && (!view.failover.Reachable || failed[lc.Cluster]) {
			continue
		}
		if view == nil {
			errs = append(errs, c.forgetLeftover(ctx, lc, fmt.Sprintf("cluster %s was removed from purser; nothing to delete there", lc.Cluster)))
			continue
		}
		gv, err := schema.ParseGroupVersion(lc.APIVersion)
		if err != nil || lc.Kind == "" {
			errs = append(errs, c.forgetLeftover(ctx, lc, "nothing to delete: the template named no valid kind"))
			continue
		}
		cl, err := c.cfg.Objects.Get(view.row)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, removeTimeout)
		deleted, err := cl.Remove(rctx, gv.WithKind(lc.Kind), lc.Namespace, lc.Name, lc.RunnableUID, lc.Attempt)
		cancel()
		switch {
		case err != nil:
			failed[lc.Cluster] = true
			errs = append(errs, fmt.Errorf("remove %s %s/%s left by %s from %s: %w", lc.Kind, lc.Namespace, lc.Name, lc.Runnable, lc.Cluster, err))
		case deleted:
			// The next pass confirms it is gone (finalizers may hold it).
			c.log.Info("deleted the copy of a removed runnable", "runnable", lc.Runnable, "attempt", lc.Attempt, "cluster", lc.Cluster)
		default:
			errs = append(errs, c.forgetLeftover(ctx, lc,
				fmt.Sprintf("%s %s/%s of attempt %d is gone from %s", lc.Kind, lc.Namespace, lc.Name, lc.Attempt, lc.Cluster)))
		}
	}
	return errors.Join(errs...)
}

// forgetLeftover drops a leftover copy that is gone, with its audit entry.
func (c *Controller) forgetLeftover(ctx context.Context, lc *store.LeftoverCopy, msg string) error {
	ns, name := splitRef(lc.Runnable)
	err := c.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.LeftoverCopies().Delete(ctx, lc); err != nil {
			return err
		}
		return tx.Audit().Append(ctx, &audit.Entry{Actor: Actor, Action: "purge", Kind: v1alpha1.KindRunnable,
			Namespace: ns, Name: name, Summary: msg + " (the runnable was removed)", Outcome: "Removed"})
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err == nil {
		c.metrics.purged.Inc()
	}
	return err
}

func splitRef(ref string) (string, string) {
	ns, name, _ := strings.Cut(ref, "/")
	return ns, name
}
