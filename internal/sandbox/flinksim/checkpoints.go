package flinksim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	path string // chk-<n>'s; "" when none completed in this simulator
}

// dueCheckpoint is a checkpoint that is due, with the path it completes at.
type dueCheckpoint struct {
	job  string
	n    int64
	path string
	ha   bool // the job runs with Kubernetes HA
	// retained is how many completed checkpoints Flink keeps of the job.
	retained int
}

// haStoreTimeout bounds the request that stands for storing a tick's
// completed checkpoints in the Kubernetes HA store.
const haStoreTimeout = 2 * time.Second

// runCheckpoints completes the due checkpoints of every running job until
// ctx is done.
func (s *Simulator) runCheckpoints(ctx context.Context) {
	reconcile.Every(ctx, checkpointTick, s.completeDue)
}

// completeDue completes the checkpoints due now. It holds s.tick
// throughout, so that a fault injected (setFault) lands between two ticks:
// whatever completed before the fault is what the job left behind, and
// nothing completes after it.
//
// With Kubernetes HA (high-availability.type: kubernetes), Flink
// completes a checkpoint in two steps: it writes the checkpoint's
// _metadata to the checkpoint storage, then stores a pointer to it in a
// ConfigMap (KubernetesStateHandleStore, through the kube-apiserver). If
// the second fails, the CheckpointCoordinator discards the checkpoint
// (its files are deleted). So no checkpoint of an HA job completes while
// its cluster's kube-apiserver is down, while one without HA goes on, and
// a checkpoint counts as completed only once its _metadata was written
// before the pointer was stored. One request to the kube-apiserver
// stands for the ConfigMap writes of the whole tick, not one per job: the
// outcome is the same at a fraction of the load. While the last store
// failed, a tick asks the kube-apiserver first and writes nothing for HA
// jobs if it still does not answer, as a JobManager that lost its leader
// lease stops triggering checkpoints.
func (s *Simulator) completeDue(ctx context.Context) {
	s.tick.Lock()
	defer s.tick.Unlock()
	now := time.Now()
	due := s.dueCheckpoints(now)
	anyHA := slices.ContainsFunc(due, func(d dueCheckpoint) bool { return d.ha })
	haDown := anyHA && s.CheckpointStoreDown() && s.haStore(ctx) != nil
	written := make([]bool, len(due))
	for i, d := range due {
		var err error
		switch {
		case d.ha && haDown:
			err = errHAStore
		case s.opts.Checkpoints != nil:
			err = s.opts.Checkpoints(ctx, d.path)
		}
		if err != nil {
			s.failCheckpoint(d, now, err)
			continue
		}
		written[i] = true
	}
	// The pointers of the HA jobs' checkpoints written above, stored
	// after their _metadata.
	if anyHA && !haDown && s.haStore(ctx) != nil {
		for i, d := range due {
			if d.ha && written[i] {
				written[i] = false
				s.discard(ctx, d.path)
				s.failCheckpoint(d, now, errHAStore)
			}
		}
	}
	for i, d := range due {
		if !written[i] {
			continue
		}
		s.mu.Lock()
		if s.chk[d.job].n < d.n {
			s.chk[d.job] = jobCheckpoints{n: d.n, last: now, path: d.path}
		}
		s.mu.Unlock()
		if old := d.n - int64(d.retained); old > 0 {
			s.discard(ctx, strings.TrimSuffix(d.path, fmt.Sprintf("chk-%d", d.n))+fmt.Sprintf("chk-%d", old))
		}
	}
}

// failCheckpoint records a checkpoint that failed: the next one is tried
// an interval later.
func (s *Simulator) failCheckpoint(d dueCheckpoint, now time.Time, err error) {
	s.log.Warn("checkpoint not written", "path", d.path, "error", err)
	s.mu.Lock()
	s.chk[d.job] = jobCheckpoints{n: d.n - 1, last: now, path: s.chk[d.job].path}
	s.mu.Unlock()
}

// discard deletes a checkpoint Flink no longer keeps (subsumed, or
// discarded unfinished), through Config.Discards.
func (s *Simulator) discard(ctx context.Context, path string) {
	if s.opts.Discards == nil {
		return
	}
	if err := s.opts.Discards(ctx, path); err != nil {
		s.log.Warn("checkpoint not discarded", "path", path, "error", err)
	}
}

// errHAStore is a checkpoint discarded because its pointer could not be
// stored in the HA ConfigMap.
var errHAStore = errors.New("the Kubernetes HA store (the kube-apiserver) does not answer: checkpoint discarded")

// haStore stands for storing checkpoint pointers in the HA ConfigMaps: it
// asks the kube-apiserver whether it is ready (which includes reaching
// etcd), and records the answer for CheckpointStoreDown.
func (s *Simulator) haStore(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, haStoreTimeout)
	defer cancel()
	err := s.readyz.Get().AbsPath("/readyz").Do(ctx).Error()
	s.mu.Lock()
	s.haDown = err != nil
	s.mu.Unlock()
	return err
}

// CheckpointStoreDown reports whether the last attempt to store the
// checkpoints of HA jobs failed (the kube-apiserver did not answer): from
// then on, and until one succeeds, no checkpoint of an HA job completes,
// and every one that did complete had its _metadata written before.
func (s *Simulator) CheckpointStoreDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.haDown
}

// LatestCheckpoint is the path of the newest checkpoint Flink completed
// of the current job of namespace/name (its _metadata was written, and for
// an HA job its pointer stored), or "" when none.
func (s *Simulator) LatestCheckpoint(namespace, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.mems[namespace+"/"+name]
	if m == nil || m.cluster.jobID == "" {
		return ""
	}
	return s.chk[m.cluster.jobID].path
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
		due = append(due, dueCheckpoint{job: c.jobID, n: done.n + 1, path: fmt.Sprintf("%s/%s/chk-%d", c.chkDir, c.jobID, done.n+1),
			ha: c.ha, retained: c.chkRetained})
	}
	return due
}
