package sandbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/purser-io/purser/internal/platform/reconcile"
)

// SupervisorEvent is what SuperviseAPIServers saw happen to one cluster's
// kube-apiserver.
type SupervisorEvent struct {
	Cluster string
	// Exited says how the process ended, when this event is its exit.
	Exited string
	// Restarted: it serves again. Err: a restart failed (it is tried again).
	Restarted bool
	Err       error
}

func (e SupervisorEvent) String() string {
	switch {
	case e.Exited != "":
		return fmt.Sprintf("%s: its kube-apiserver exited (%s) without being asked to; restarting it", e.Cluster, e.Exited)
	case e.Restarted:
		return fmt.Sprintf("%s: its kube-apiserver is back", e.Cluster)
	}
	return fmt.Sprintf("%s: restarting its kube-apiserver failed, trying again: %v", e.Cluster, e.Err)
}

// supervisePoll is how often a supervisor looks for a kube-apiserver that
// was stopped on purpose to be started again.
const supervisePoll = time.Second

// SuperviseAPIServers watches the kube-apiserver of every cluster until ctx
// ends and restarts one that exits without being asked to (killed by hand,
// crashed, out of memory), on the same port with its data, telling report
// of each exit and restart. A kube-apiserver stopped on purpose
// (StopAPIServer, Stop) is left alone. It returns once every supervisor has
// stopped; call it before Stop, and Stop only after it returned, so that no
// restart races the shutdown.
func (f *Fleet) SuperviseAPIServers(ctx context.Context, report func(SupervisorEvent)) {
	var wg sync.WaitGroup
	for _, c := range f.clusters {
		wg.Go(func() { c.superviseAPIServer(ctx, report) })
	}
	wg.Wait()
}

func (c *Cluster) superviseAPIServer(ctx context.Context, report func(SupervisorEvent)) {
	for {
		// A kube-apiserver stopped on purpose is left alone until whoever
		// stopped it starts it again.
		var p *process
		if err := wait.PollUntilContextCancel(ctx, supervisePoll, true, func(context.Context) (bool, error) {
			ps := c.processes(binAPIServer)
			if len(ps) == 0 || ps[0].asked.Load() {
				return false, nil
			}
			p = ps[0]
			return true, nil
		}); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-p.done:
		}
		if p.asked.Load() {
			continue
		}
		report(SupervisorEvent{Cluster: c.cfg.Name, Exited: fmt.Sprint(p.err)})
		if err := reconcile.Retry(ctx, reconcile.Backoff(time.Second, 30*time.Second), func(ctx context.Context, _ int) error {
			err := c.StartAPIServer(ctx)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				report(SupervisorEvent{Cluster: c.cfg.Name, Err: err})
			}
			return err
		}); err != nil {
			return
		}
		report(SupervisorEvent{Cluster: c.cfg.Name, Restarted: true})
	}
}
