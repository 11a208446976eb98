package failover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/flink/checkpoints"
	"github.com/purser-io/purser/internal/hub/store"
)

// CheckpointResolver finds a job's newest completed checkpoint under a
// checkpoint directory (internal/flink/checkpoints.Resolver).
type CheckpointResolver interface {
	Latest(ctx context.Context, dir, jobID string) (checkpoints.Checkpoint, error)
}

// lastStateDummy is what the operator writes as upgradeSavepointPath for a
// last-state deployment (AbstractJobReconciler.LAST_STATE_DUMMY_SP_PATH):
// not a location.
const lastStateDummy = "KUBERNETES_OPERATOR_LAST_STATE"

// reportedSavepoint is the savepoint the Flink operator reports in the
// last observed status (status.jobStatus.savepointInfo.lastSavepoint:
// SavepointInfo.updateLastSavepoint, every periodic, manual and upgrade
// savepoint on operators before 1.10 or without the FlinkStateSnapshot
// CRD), or nil.
func reportedSavepoint(status map[string]any) *v1alpha1.RestorePoint {
	sp, _ := dig(status, "jobStatus", "savepointInfo", "lastSavepoint").(map[string]any)
	loc, _ := sp["location"].(string)
	if loc == "" || loc == lastStateDummy {
		return nil
	}
	p := &v1alpha1.RestorePoint{Path: loc, Kind: v1alpha1.RestoreSavepoint,
		Source: "status.jobStatus.savepointInfo.lastSavepoint"}
	if id := jobIDOf(status); writtenBy(loc, id) {
		p.JobID = id
	}
	if ms, ok := millis(sp["timeStamp"]); ok {
		t := time.UnixMilli(ms).UTC()
		p.TakenAt = &t
	}
	return p
}

// checkpointDir is the Flink checkpoint directory the template configures
// (state.checkpoints.dir; execution.checkpointing.dir since Flink 1.20),
// or "".
func checkpointDir(template map[string]any) string {
	conf, _ := dig(template, "spec", "flinkConfiguration").(map[string]any)
	for _, k := range []string{"execution.checkpointing.dir", "state.checkpoints.dir"} {
		if d, _ := conf[k].(string); d != "" {
			return d
		}
	}
	return ""
}

// restoreCandidates gathers the restore points the attempt whose last
// status is status wrote: the savepoint the operator reports, and the
// newest completed checkpoint of its job in the checkpoint storage. The
// string says why there is none, for the messages.
func (c *Controller) restoreCandidates(ctx context.Context, rec *store.Runnable, template, status map[string]any) ([]v1alpha1.RestorePoint, string) {
	var out []v1alpha1.RestorePoint
	var why []error
	if p := reportedSavepoint(status); p != nil {
		out = append(out, *p)
	} else {
		why = append(why, errors.New("the operator reports no savepoint"))
	}
	name := v1alpha1.ObjectName(template, rec.Name)
	snaps, err := c.reportedSnapshots(ctx, rec.Cluster, rec.Namespace, name, jobIDOf(status))
	switch {
	case err != nil:
		why = append(why, fmt.Errorf("FlinkStateSnapshots: %w", err))
	case len(snaps) == 0:
		why = append(why, errors.New("no completed FlinkStateSnapshot"))
	}
	out = append(out, snaps...)
	dir, job := checkpointDir(template), jobIDOf(status)
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
		at := cp.CompletedAt.UTC()
		out = append(out, v1alpha1.RestorePoint{Path: cp.Path, Kind: v1alpha1.RestoreCheckpoint,
			Source: "newest completed checkpoint under " + dir, JobID: job, TakenAt: &at})
	}
	if len(out) == 0 {
		// One line: it goes into the runnable's status message.
		parts := make([]string, len(why))
		for i, e := range why {
			parts[i] = e.Error()
		}
		return nil, strings.Join(parts, "; ")
	}
	return ofCurrentJob(out, job), ""
}

// ofCurrentJob keeps, when any candidate was written by the job that ran
// last (job), only those: whatever an earlier job of the attempt wrote
// (the savepoint an upgrade restored the current job from) is older than
// anything the current job completed, and storage timestamps (S3's
// Last-Modified, to the second) are too coarse to tell them apart.
func ofCurrentJob(candidates []v1alpha1.RestorePoint, job string) []v1alpha1.RestorePoint {
	var current []v1alpha1.RestorePoint
	for _, c := range candidates {
		if job != "" && c.JobID == job {
			current = append(current, c)
		}
	}
	if len(current) == 0 {
		return candidates
	}
	return current
}

func jobIDOf(status map[string]any) string {
	id, _ := dig(status, "jobStatus", "jobId").(string)
	return id
}

func dig(m map[string]any, path ...string) any {
	var cur any = m
	for _, k := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}

// millis reads the operator's millisecond timestamps, numbers in
// Savepoint.timeStamp, strings in JobStatus.
func millis(v any) (int64, bool) {
	switch x := v.(type) {
	case float64:
		return int64(x), x > 0
	case int64:
		return x, x > 0
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil && n > 0
	}
	return 0, false
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

// snapshotKind is the FlinkStateSnapshot kind the agent tracks.
var snapshotKind = struct{ apiVersion, kind string }{"flink.apache.org/v1beta1", "FlinkStateSnapshot"}

// reportedSnapshots are the restore points the Flink operator (1.10+, with
// its FlinkStateSnapshot CRD) recorded for the FlinkDeployment name on
// cluster: every COMPLETED FlinkStateSnapshot whose spec.jobReference names
// it (FlinkStateSnapshotUtils.createSavepointResource /
// createCheckpointResource, labelled job-reference.name by
// getSnapshotLabels), at its status.path (snapshotSuccessful), as the
// cluster's agent reported them to the inventory.
func (c *Controller) reportedSnapshots(ctx context.Context, cluster, namespace, name, jobID string) ([]v1alpha1.RestorePoint, error) {
	sel, err := labels.Parse("job-reference.name=" + name)
	if err != nil {
		return nil, nil // a name no label value can hold: no snapshot refers to it
	}
	var rows []store.InventoryRow
	err = c.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		rows, _, err = tx.ListInventory(ctx, store.InventoryFilter{Cluster: cluster, APIVersion: snapshotKind.apiVersion,
			Kind: snapshotKind.kind, Namespace: namespace, Selector: sel, Limit: 1000})
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
		if p := snapshotPoint(obj, name); p != nil {
			if writtenBy(p.Path, jobID) {
				p.JobID = jobID
			}
			out = append(out, *p)
		}
	}
	return out, nil
}

// snapshotPoint is the restore point of one FlinkStateSnapshot of the
// FlinkDeployment name, or nil when it is not a completed one of it.
func snapshotPoint(obj map[string]any, name string) *v1alpha1.RestorePoint {
	state, _ := dig(obj, "status", "state").(string)
	path, _ := dig(obj, "status", "path").(string)
	kind, _ := dig(obj, "spec", "jobReference", "kind").(string)
	ref, _ := dig(obj, "spec", "jobReference", "name").(string)
	if state != "COMPLETED" || path == "" || ref != name || (kind != "" && kind != "FlinkDeployment") {
		return nil
	}
	p := &v1alpha1.RestorePoint{Path: path, Kind: v1alpha1.RestoreSavepoint,
		Source: "FlinkStateSnapshot " + fmt.Sprint(dig(obj, "metadata", "name")) + " status.path"}
	if _, ok := dig(obj, "spec", "checkpoint").(map[string]any); ok {
		p.Kind = v1alpha1.RestoreCheckpoint
	}
	if ts, _ := dig(obj, "status", "resultTimestamp").(string); ts != "" {
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			t = t.UTC()
			p.TakenAt = &t
		}
	}
	return p
}

// writtenBy reports whether the savepoint or checkpoint at path was
// written by the job id: Flink names a savepoint directory
// savepoint-<first 6 hex of the job id>-<random>
// (AbstractFsCheckpointStorageAccess.initializeLocationForSavepoint) and
// puts a checkpoint under <dir>/<job id>/chk-<n>. A savepoint of another
// job id is the one an upgrade or resume restored the current job from.
func writtenBy(path, job string) bool {
	if len(job) < 6 {
		return false
	}
	return strings.Contains(path, "savepoint-"+job[:6]+"-") || strings.Contains(path, "/"+job+"/chk-")
}
