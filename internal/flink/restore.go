package flink

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/platform/fields"
)

// lastStateDummy is what the operator writes as upgradeSavepointPath for a
// last-state deployment (AbstractJobReconciler.LAST_STATE_DUMMY_SP_PATH):
// not a location.
const lastStateDummy = "KUBERNETES_OPERATOR_LAST_STATE"

// ReportedSavepoint is the savepoint the Flink operator reports in the
// last observed status of a FlinkDeployment
// (status.jobStatus.savepointInfo.lastSavepoint:
// SavepointInfo.updateLastSavepoint, every periodic, manual and upgrade
// savepoint on operators before 1.10 or without the FlinkStateSnapshot
// CRD), or nil.
func ReportedSavepoint(status map[string]any) *v1alpha1.RestorePoint {
	sp, _ := dig(status, "jobStatus", "savepointInfo", "lastSavepoint").(map[string]any)
	loc, _ := sp["location"].(string)
	if loc == "" || loc == lastStateDummy {
		return nil
	}
	p := &v1alpha1.RestorePoint{Path: loc, Kind: v1alpha1.RestoreSavepoint,
		Source: "status.jobStatus.savepointInfo.lastSavepoint"}
	if id := JobID(status); WrittenBy(loc, id) {
		p.JobID = id
	}
	if ms, ok := millis(sp["timeStamp"]); ok {
		t := time.UnixMilli(ms).UTC()
		p.TakenAt = &t
	}
	return p
}

// CheckpointDir is the Flink checkpoint directory a FlinkDeployment's
// template configures (state.checkpoints.dir; execution.checkpointing.dir
// since Flink 1.20), or "".
func CheckpointDir(template map[string]any) string {
	conf, _ := dig(template, "spec", "flinkConfiguration").(map[string]any)
	for _, k := range []string{"execution.checkpointing.dir", "state.checkpoints.dir"} {
		if d, _ := conf[k].(string); d != "" {
			return d
		}
	}
	return ""
}

// CheckpointPoint is the restore point of job's newest completed
// checkpoint, found at path under the checkpoint directory dir.
func CheckpointPoint(path string, completedAt time.Time, dir, job string) v1alpha1.RestorePoint {
	at := completedAt.UTC()
	return v1alpha1.RestorePoint{Path: path, Kind: v1alpha1.RestoreCheckpoint,
		Source: "newest completed checkpoint under " + dir, JobID: job, TakenAt: &at}
}

// OfCurrentJob keeps, when any candidate was written by the job that ran
// last (job), only those: whatever an earlier job of the attempt wrote
// (the savepoint an upgrade restored the current job from) is older than
// anything the current job completed, and storage timestamps (S3's
// Last-Modified, to the second) are too coarse to tell them apart.
func OfCurrentJob(candidates []v1alpha1.RestorePoint, job string) []v1alpha1.RestorePoint {
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

// JobID is the id of the Flink job the status last reported
// (status.jobStatus.jobId), or "".
func JobID(status map[string]any) string {
	id, _ := dig(status, "jobStatus", "jobId").(string)
	return id
}

// SnapshotLabel is the label the operator puts on a FlinkStateSnapshot to
// name the FlinkDeployment it was taken of
// (FlinkStateSnapshotUtils.getSnapshotLabels).
const SnapshotLabel = "job-reference.name"

// SnapshotPoint is the restore point of one FlinkStateSnapshot (the
// operator's CRD since 1.10) of the FlinkDeployment name, or nil when it
// is not a completed one of it: every COMPLETED snapshot whose
// spec.jobReference names it (FlinkStateSnapshotUtils
// .createSavepointResource / createCheckpointResource), at its
// status.path (snapshotSuccessful). When job wrote it, the point says so.
func SnapshotPoint(obj map[string]any, name, job string) *v1alpha1.RestorePoint {
	state, _ := dig(obj, "status", "state").(string)
	path, _ := dig(obj, "status", "path").(string)
	kind, _ := dig(obj, "spec", "jobReference", "kind").(string)
	ref, _ := dig(obj, "spec", "jobReference", "name").(string)
	if state != "COMPLETED" || path == "" || ref != name || (kind != "" && kind != KindDeployment) {
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
	if WrittenBy(p.Path, job) {
		p.JobID = job
	}
	return p
}

// WrittenBy reports whether the savepoint or checkpoint at path was
// written by the job id: Flink names a savepoint directory
// savepoint-<first 6 hex of the job id>-<random>
// (AbstractFsCheckpointStorageAccess.initializeLocationForSavepoint) and
// puts a checkpoint under <dir>/<job id>/chk-<n>. A savepoint of another
// job id is the one an upgrade or resume restored the current job from.
func WrittenBy(path, job string) bool {
	if len(job) < 6 {
		return false
	}
	return strings.Contains(path, "savepoint-"+job[:6]+"-") || strings.Contains(path, "/"+job+"/chk-")
}

// dig walks m along path; nil where a step is missing or not a map.
func dig(m map[string]any, path ...string) any {
	v, _ := fields.Get(m, path...)
	return v
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
