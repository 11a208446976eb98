package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/cli/client"
)

// pollInterval is how often move --wait and drain look at a move's progress.
const pollInterval = 500 * time.Millisecond

func newMoveCommand() *cobra.Command {
	var cf clientFlags
	var namespace, to string
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "move runnable NAME",
		Short: "Move a running runnable to another cluster on purpose, handing its state over",
		Long: `A planned move of a Running runnable (POST .../move). With --to the target
is that cluster; without it placement chooses among the eligible clusters
other than the current one. A FlinkDeployment's job is stopped with a
savepoint on its cluster (spec.job.state suspended, upgradeMode savepoint),
and the copy on the target restores from exactly the savepoint the
operator reported (spec.job.initialSavepointPath); the stopped copy is
removed once the new one runs. If the savepoint fails, the job is put back
to running where it was and the move ends Failed, saying why. Other kinds
move as a cluster failover moves them: the old copy is removed before the
new one starts. A runnable that is not Running, or is being moved already,
is refused (409); a target that cannot take it (not registered, not Ready,
tainted, outside its placement, lacking what it dependsOn) is refused (422)
with the reason. --wait waits for the move to end and prints its downtime.`,
		Example: "  purser move runnable wordcount -n team-a --to sandbox-2 --wait",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := oneNamed(args)
			if err != nil {
				return err
			}
			if t.res.Kind != v1alpha1.KindRunnable {
				return fmt.Errorf("only runnables can be moved; a %s follows its spec on every matching cluster", t.res.Singular())
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			r, err := c.Move(cmd.Context(), namespace, t.name, to)
			if err != nil {
				return named(c, err)
			}
			fmt.Fprintf(stdout(cmd), "runnable/%s/%s move to %s asked: %s\n", namespace, t.name, r.Status.Move.To, r.Status.Message)
			if !wait {
				return nil
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			done, err := c.WaitMoved(ctx, namespace, t.name, r.Status.Move.At, pollInterval, func(msg string) {
				fmt.Fprintf(stdout(cmd), "  %s\n", msg)
			})
			if err != nil {
				return named(c, err)
			}
			if m := done.Status.Move; m.Step == v1alpha1.MoveFailed {
				return fmt.Errorf("runnable %s/%s was not moved: %s", namespace, t.name, done.Status.Message)
			}
			fmt.Fprintf(stdout(cmd), "runnable/%s/%s moved to %s%s\n", namespace, t.name, done.Status.Move.To, downtime(done.Status.Move))
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	cmd.Flags().StringVar(&to, "to", "", "the target cluster (default: placement chooses)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the move to end")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long --wait waits")
	cf.register(cmd)
	return cmd
}

func downtime(m *v1alpha1.Move) string {
	if m == nil || m.DowntimeSeconds == nil {
		return ""
	}
	return fmt.Sprintf(", downtime %.1f s", *m.DowntimeSeconds)
}

// newDrainCommand is drain by planned moves: cordon, move every runnable
// running there, then the NoExecute taint for whatever is left.
func newDrainCommand() *cobra.Command {
	var cf clientFlags
	var concurrency int
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "drain [cluster] NAME",
		Short: "Move the work off a cluster by planned moves, then keep all work away (taint " + v1alpha1.TaintCordon + ":NoExecute)",
		Long: `Drain cordons the cluster (taint ` + v1alpha1.TaintCordon + `:NoSchedule, so nothing new
lands there), then moves every runnable Running there to another cluster
by a planned move, --concurrency at a time (see purser move: a
FlinkDeployment hands its state over by a savepoint, so nothing is
reprocessed), printing each one moved with its downtime. Then it sets the
taint to NoExecute, as the console's Drain button does, so that whatever
could not be moved (not Running, no eligible target, a failed savepoint,
or a move that did not end within --timeout) fails over by its failover
policy, and no new work lands there. Deployables that do not tolerate the
taint are removed from the cluster (docs/syncer.md). Uncordon removes the
taint.`,
		Example: "  purser drain sandbox-1 --concurrency 2",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if concurrency < 1 {
				return fmt.Errorf("--concurrency must be at least 1")
			}
			name, err := oneClusterArg(args)
			if err != nil {
				return err
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			out := stdout(cmd)
			if err := taint(cmd.Context(), c, name, corev1.TaintEffectNoSchedule); err != nil {
				return named(c, err)
			}
			fmt.Fprintf(out, "cluster/%s cordoned\n", name)
			items, err := c.ListObjects(cmd.Context(), client.Resources[0], client.ListOptions{Cluster: name, Phase: string(v1alpha1.PhaseRunning)})
			if err != nil {
				return named(c, err)
			}
			refs := make([][2]string, 0, len(items))
			for _, it := range items {
				meta, _ := it["metadata"].(map[string]any)
				ns, _ := meta["namespace"].(string)
				n, _ := meta["name"].(string)
				refs = append(refs, [2]string{ns, n})
			}
			sort.Slice(refs, func(i, j int) bool { return refs[i][0]+"/"+refs[i][1] < refs[j][0]+"/"+refs[j][1] })
			start := time.Now()
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			var mu sync.Mutex
			moved, failed := 0, 0
			report := func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				fmt.Fprintf(out, format, args...)
			}
			work := make(chan [2]string)
			var wg sync.WaitGroup
			for range min(concurrency, max(len(refs), 1)) {
				wg.Go(func() {
					for ref := range work {
						ns, n := ref[0], ref[1]
						r, err := c.Move(ctx, ns, n, "")
						if err == nil {
							r, err = c.WaitMoved(ctx, ns, n, r.Status.Move.At, pollInterval, nil)
						}
						mu.Lock()
						switch {
						case err != nil:
							failed++
							fmt.Fprintf(out, "%d of %d not moved: %s/%s: %v\n", moved+failed, len(refs), ns, n, err)
						case r.Status.Move.Step == v1alpha1.MoveFailed:
							failed++
							fmt.Fprintf(out, "%d of %d not moved: %s/%s: %s\n", moved+failed, len(refs), ns, n, r.Status.Message)
						default:
							moved++
							fmt.Fprintf(out, "%d of %d moved: %s/%s to %s%s\n", moved, len(refs), ns, n, r.Status.Move.To, downtime(r.Status.Move))
						}
						mu.Unlock()
					}
				})
			}
			for _, ref := range refs {
				work <- ref
			}
			close(work)
			wg.Wait()
			report("moved %d of %d runnables off %s in %.1f s\n", moved, len(refs), name, time.Since(start).Seconds())
			if err := taint(cmd.Context(), c, name, corev1.TaintEffectNoExecute); err != nil {
				return named(c, err)
			}
			fmt.Fprintf(out, "cluster/%s drained\n", name)
			if failed > 0 {
				return fmt.Errorf("%d of %d runnables on %s were not moved by a planned move; the NoExecute taint fails them over by their failover policy", failed, len(refs), name)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&concurrency, "concurrency", 1, "how many runnables move at once")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "how long the moves may take in all; what has not moved by then fails over under the NoExecute taint")
	cf.register(cmd)
	return cmd
}

// taint sets purser's maintenance taint on cluster name to effect.
func taint(ctx context.Context, c *client.Client, name string, effect corev1.TaintEffect) error {
	_, _, err := c.EditCluster(ctx, name, func(cl *v1alpha1.Cluster) (bool, error) {
		var changed bool
		cl.Spec.Taints, changed = client.Cordon(cl.Spec.Taints, effect)
		return changed, nil
	})
	return err
}
