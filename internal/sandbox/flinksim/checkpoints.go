package flinksim

import (
	"context"
	"fmt"
	"time"

	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Flink's own checkpointing. A running job completes a checkpoint every
// execution.checkpointing.interval, writing its _metadata under
// state.checkpoints.dir/<job id>/chk-<n>, whether or not the operator
// looks (Flink's CheckpointCoordinator); the operator only reports the
// newest one in the status at its passes (SnapshotObserver), which come
// every kubernetes.operator.reconcile.interval for a running deployment.
// The count lives apart from memory, which a pass copies and writes back
// whole, and is kept by job id: a last-state upgrade that keeps the job id
// numbers on from where the job was.

// checkpointTick is how often (lengthened by up to a fifth) the stand-in
// for Flink looks for a due checkpoint.
const checkpointTick = 20 * time.Millisecond

// jobCheckpoints is what Flink has completed of one job's checkpoints.
type jobCheckpoints struct {
	n    int64 // the newest is chk-<n>; 0: none yet
	last time.Time
}

// dueCheckpoint is a checkpoint that is due, with the path it completes at.
type dueCheckpoint struct {
	job  string
	n    int64
	path string
}

// runCheckpoints completes the due checkpoints of every running job until
// ctx is done.
func (s *Simulator) runCheckpoints(ctx context.Context) {
	reconcile.Every(ctx, checkpointTick, func(ctx context.Context) {
		now := time.Now()
		for _, d := range s.dueCheckpoints(now) {
			if s.opts.Checkpoints != nil {
				if err := s.opts.Checkpoints(ctx, d.path); err != nil {
					// A checkpoint that cannot be written fails; the next
					// one is tried an interval later.
					s.log.Warn("checkpoint not written", "path", d.path, "error", err)
					s.mu.Lock()
					s.chk[d.job] = jobCheckpoints{n: d.n - 1, last: now}
					s.mu.Unlock()
					continue
				}
			}
			s.mu.Lock()
			if s.chk[d.job].n < d.n {
				s.chk[d.job] = jobCheckpoints{n: d.n, last: now}
			}
			s.mu.Unlock()
		}
	})
}

// dueCheckpoints lists the jobs running at now whose next checkpoint is
// due, with the number and path it completes at.
func (s *Simulator) dueCheckpoints(now time.Time) []dueCheckpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	var due []dueCheckpoint
	for key, m := range s.mems {
		c := &m.cluster
		// An injected fault leaves no JobManager to coordinate checkpoints
		// (or a job that is about to fail).
		if !c.exists || c.jobState != "RUNNING" || c.chkEvery <= 0 || now.Before(c.readyAt) || s.faults[key] != 0 {
			continue
		}
		done := s.chk[c.jobID]
		from := done.last
		if from.Before(c.started) {
			from = c.started
		}
		if now.Before(from.Add(c.chkEvery)) {
			continue
		}
		due = append(due, dueCheckpoint{job: c.jobID, n: done.n + 1, path: fmt.Sprintf("%s/%s/chk-%d", c.chkDir, c.jobID, done.n+1)})
	}
	return due
}
