package failover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/flink"
	"github.com/purser-io/purser/internal/flink/checkpoints"
	"github.com/purser-io/purser/internal/hub/store"
)

// CheckpointResolver finds a job's newest completed checkpoint under a
// checkpoint directory (internal/flink/checkpoints.Resolver).
type CheckpointResolver interface {
	Latest(ctx context.Context, dir, jobID string) (checkpoints.Checkpoint, error)
}

// restoreCandidates gathers the restore points the attempt whose last
// status is status wrote: the savepoint the operator reports, and the
// newest completed checkpoint of its job in the checkpoint storage. The
// string says why there is none, for the messages.
func (c *Controller) restoreCandidates(ctx context.Context, rec *store.Runnable, template, status map[string]any) ([]v1alpha1.RestorePoint, string) {
	var out []v1alpha1.RestorePoint
	var why []error
	if p := flink.ReportedSavepoint(status); p != nil {
		out = append(out, *p)
	} else {
		why = append(why, errors.New("the operator reports no savepoint"))
	}
	name := v1alpha1.ObjectName(template, rec.Name)
	snaps, err := c.reportedSnapshots(ctx, rec.Cluster, rec.Namespace, name, flink.JobID(status))
	switch {
	case err != nil:
		why = append(why, fmt.Errorf("FlinkStateSnapshots: %w", err))
	case len(snaps) == 0:
		why = append(why, errors.New("no completed FlinkStateSnapshot"))
	}
	out = append(out, snaps...)
	dir, job := flink.CheckpointDir(template), flink.JobID(status)
	switch {
	case dir == "":
		why = append(why, errors.New("the template configures no checkpoint directory"))
	case job == "":
		why = append(why, errors.New("no job id was reported"))
	case c.cfg.Checkpoints == nil:
		why = append(why, errors.New("no checkpoint storage is configured (--checkpoint-store-endpoint)"))
	default:
		cp, err := c.cfg.Checkpoints.Latest(ctx, dir, job)
		if err != nil {
			why = append(why, err)
			break
		}
		out = append(out, flink.CheckpointPoint(cp.Path, cp.CompletedAt, dir, job))
	}
	if len(out) == 0 {
		// One line: it goes into the runnable's status message.
		parts := make([]string, len(why))
		for i, e := range why {
			parts[i] = e.Error()
		}
		return nil, strings.Join(parts, "; ")
	}
	return flink.OfCurrentJob(out, job), ""
}

// restorePolicy is the runnable's statePreservation.restorePoint.
func restorePolicy(spec *v1alpha1.RunnableSpec) string {
	if app := appFailover(spec); app != nil && app.StatePreservation != nil {
		return app.StatePreservation.RestorePoint
	}
	return ""
}

func waitingForRestorePoint(v Verdict, cluster, why string) string {
	return fmt.Sprintf("%s; it stays on %s because no proven restore point is known (%s) and statePreservation.restorePoint is Required; it moves once one is, or set restorePoint: IfAvailable to start it afresh", v.Message, cluster, why)
}

// reportedSnapshots are the restore points the Flink operator (1.10+, with
// its FlinkStateSnapshot CRD) recorded for the FlinkDeployment name on
// cluster (flink.SnapshotPoint), as the cluster's agent reported them to
// the inventory.
func (c *Controller) reportedSnapshots(ctx context.Context, cluster, namespace, name, jobID string) ([]v1alpha1.RestorePoint, error) {
	sel, err := labels.Parse(flink.SnapshotLabel + "=" + name)
	if err != nil {
		return nil, nil // a name no label value can hold: no snapshot refers to it
	}
	var rows []store.InventoryRow
	err = c.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		rows, _, err = tx.Inventory().List(ctx, store.InventoryFilter{Cluster: cluster, APIVersion: flink.APIVersion,
			Kind: flink.KindStateSnapshot, Namespace: namespace, Selector: sel, Limit: 1000})
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []v1alpha1.RestorePoint
	for _, row := range rows {
		var obj map[string]any
		if json.Unmarshal(row.Object, &obj) != nil {
			continue
		}
		if p := flink.SnapshotPoint(obj, name, jobID); p != nil {
			out = append(out, *p)
		}
	}
	return out, nil
}
