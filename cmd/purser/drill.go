package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/cli/printer"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

func newDrillCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drill",
		Short: "What losing a DC or a cluster would do (--dry-run), or a real drill: cordon it and move its work",
		Long:  drillLong,
	}
	cmd.AddCommand(newDrillTargetCommand(v1alpha1.DrillTargetDC, "dc NAME", "the DC whose clusters carry the label dc=NAME", "  purser drill dc dc1 --dry-run\n  purser drill dc dc1"),
		newDrillTargetCommand(v1alpha1.DrillTargetCluster, "cluster NAME", "one cluster", "  purser drill cluster dc1-a --dry-run -o json"),
		newDrillTargetCommand(v1alpha1.DrillTargetSelector, "selector SELECTOR", "the clusters a label selector picks",
			"  purser drill selector 'dc in (dc1,dc2)' --dry-run"),
		newDrillListCommand(), newDrillGetCommand(), newDrillEndCommand())
	return cmd
}

const drillLong = `A drill asks, before it happens, whether the farm could absorb losing a DC
(the clusters whose "dc" label names it), one cluster, or the clusters a
label selector picks. With --dry-run it reads a snapshot of the farm and
runs the real placement code over the runnables there, in the order the
failover controller takes them (priority, then fair share, then age), each
one's room reserved before the next is weighed, and prints:

  - the verdict: Absorbed (everything finds a cluster), Partial (some are
    left queued for capacity or quota), NotAbsorbed (some have no cluster
    left that could ever take them);
  - each move: from, to, the expected downtime at the failover controller's
    eviction rate, and for a Flink job the restore point recorded for it;
  - each runnable left and the reason placement gives (cpu, memory, quota,
    placement rule, taint, dependency);
  - each cluster's runnables and free CPU and memory before and after.

Nothing is changed.

Without --dry-run the drill is real: the what-if is run first, and unless
its verdict is Absorbed (or --force is given) nothing happens. Then the
target's clusters are cordoned (taint purser.io/cordon:NoSchedule, as
purser cordon sets it) and each runnable the what-if moves is asked a
planned move to the cluster the what-if chose, in its order (a
FlinkDeployment by savepoint, see purser move --help); what the what-if
left without a cluster stays where it is. The command prints a line as
each move ends, then the report: planned against actual per runnable
(target, downtime, restore point, why a move failed) and the totals.
--wait=false returns once the drill started; purser drill get ID reads
the report later, purser drill list lists the drills, and purser drill
end ID uncordons the clusters and, with --move-back, moves the work back.
One drill runs at a time. Admins only; every step is in purser history.
See docs/drills.md.`

func newDrillTargetCommand(kind, use, what, example string) *cobra.Command {
	var cf clientFlags
	var tf tableFlags
	var output string
	var dryRun, force, wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:     use + " [--dry-run]",
		Short:   "What losing " + what + " would do, or a real drill of it",
		Long:    "What losing " + what + " would do (--dry-run), or a real drill of it.\n\n" + drillLong,
		Example: example,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := printer.ParseFormat(output, printer.OutputYAML, printer.OutputJSON)
			if err != nil {
				return err
			}
			if dryRun && force {
				return fmt.Errorf("--force is for a real drill; a dry run changes nothing")
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			target := v1alpha1.DrillTarget{Kind: kind, Name: args[0]}
			if !dryRun {
				return runDrill(cmd, c, target, force, wait, timeout, format, tf.noHeaders)
			}
			rep, raw, err := c.DrillDryRun(cmd.Context(), target)
			if err != nil {
				return named(c, err)
			}
			if format.Table() {
				return printer.Drill(stdout(cmd), rep, tf.noHeaders)
			}
			return printer.Structured(stdout(cmd), format.Name, raw)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: tables)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "compute what would happen and change nothing")
	cmd.Flags().BoolVar(&force, "force", false, "start the real drill although the what-if's verdict is not Absorbed; what has no room stays where it is")
	cmd.Flags().BoolVar(&wait, "wait", true, "print each move as it ends and wait for the drill to end")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "how long --wait waits; the drill goes on after it")
	cf.register(cmd)
	tf.register(cmd)
	return cmd
}

// runDrill starts a real drill and, with wait, follows it to its end.
func runDrill(cmd *cobra.Command, c *client.Client, target v1alpha1.DrillTarget, force, wait bool, timeout time.Duration, format printer.Format, noHeaders bool) error {
	out := stdout(cmd)
	d, err := c.StartDrill(cmd.Context(), target, force)
	if err != nil {
		return named(c, err)
	}
	fmt.Fprintf(out, "drill %s started: %s %s; cordoned %s; %d planned moves, %d left where they are\n", d.Metadata.Name, target.Kind, target.Name,
		listOrNone(d.Status.Cordoned), d.Status.Totals.Planned, d.Status.Totals.Unplaceable)
	if !wait {
		return nil
	}
	d, err = followDrill(cmd.Context(), c, d, timeout, out, func(o v1alpha1.DrillOutcome) (string, string) { return o.Step, o.Error })
	if err != nil {
		return named(c, err)
	}
	if err := printDrill(out, d, format, noHeaders); err != nil {
		return err
	}
	if d.Status.State == v1alpha1.DrillFailed || d.Status.Totals.Failed > 0 {
		return fmt.Errorf("drill %s: %d of %d planned moves did not happen; see the report above", d.Metadata.Name, d.Status.Totals.Failed, d.Status.Totals.Planned)
	}
	return nil
}

// followDrill polls drill d until it is no longer Running, printing a
// line for each runnable whose step (as stepOf gives it) ends.
func followDrill(ctx context.Context, c *client.Client, d *v1alpha1.Drill, timeout time.Duration, out io.Writer,
	stepOf func(v1alpha1.DrillOutcome) (step, why string)) (*v1alpha1.Drill, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	seen := map[string]string{}
	for _, o := range d.Status.Runnables {
		seen[o.Runnable], _ = stepOf(o)
	}
	done := 0
	for {
		for _, o := range d.Status.Runnables {
			step, why := stepOf(o)
			if step == seen[o.Runnable] || (step != v1alpha1.MoveDone && step != v1alpha1.MoveFailed) {
				seen[o.Runnable] = step
				continue
			}
			seen[o.Runnable] = step
			done++
			if step == v1alpha1.MoveFailed {
				fmt.Fprintf(out, "%d not moved: %s: %s\n", done, o.Runnable, why)
				continue
			}
			to, down := o.To, o.DowntimeSeconds
			if o.Back != nil && o.Back.Step == step {
				to, down = o.Back.To, o.Back.DowntimeSeconds
			}
			line := fmt.Sprintf("%d moved: %s to %s", done, o.Runnable, to)
			if down != nil {
				line += fmt.Sprintf(", downtime %.1f s", *down)
			}
			if o.Back == nil && o.PlannedTo != "" && o.PlannedTo != o.To {
				line += " (planned " + o.PlannedTo + ")"
			}
			fmt.Fprintln(out, line)
		}
		if d.Status.State != v1alpha1.DrillRunning {
			return d, nil
		}
		if !reconcile.Sleep(ctx, pollInterval) {
			return nil, fmt.Errorf("drill %s is still running after %s (it goes on; purser drill get %s): %w", d.Metadata.Name, timeout, d.Metadata.Name, ctx.Err())
		}
		next, _, err := c.GetDrill(ctx, d.Metadata.Name)
		if err != nil {
			return nil, err
		}
		d = next
	}
}

func printDrill(out io.Writer, d *v1alpha1.Drill, format printer.Format, noHeaders bool) error {
	if format.Table() {
		return printer.DrillRun(out, d, noHeaders)
	}
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	return printer.Structured(out, format.Name, raw)
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "no cluster"
	}
	s := names[0]
	for _, n := range names[1:] {
		s += ", " + n
	}
	return s
}

func newDrillListCommand() *cobra.Command {
	var cf clientFlags
	var tf tableFlags
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the real drills, newest first",
		Long:    "List the real drills, newest first: target, state, the what-if's verdict, moves done of planned, failed and unplaceable, who started it and when. Admins only.",
		Example: "  purser drill list",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			ds, err := c.ListDrills(cmd.Context())
			if err != nil {
				return named(c, err)
			}
			return printer.DrillList(stdout(cmd), ds, tf.noHeaders)
		},
	}
	cf.register(cmd)
	tf.register(cmd)
	return cmd
}

func newDrillGetCommand() *cobra.Command {
	var cf clientFlags
	var tf tableFlags
	var output string
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "A real drill's report: planned against actual per runnable",
		Long: `A real drill's report: its state, then for each runnable the what-if's
target and expected downtime against where it went, the downtime observed,
the savepoint it restored from, why a move failed, and its move back; the
totals and the time taken against the time planned. -o json or yaml print
the API's object (GET /api/v1/drills/ID). Admins only.`,
		Example: "  purser drill get 3\n  purser drill get 3 -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := printer.ParseFormat(output, printer.OutputYAML, printer.OutputJSON)
			if err != nil {
				return err
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			d, raw, err := c.GetDrill(cmd.Context(), args[0])
			if err != nil {
				return named(c, err)
			}
			if format.Table() {
				return printer.DrillRun(stdout(cmd), d, tf.noHeaders)
			}
			return printer.Structured(stdout(cmd), format.Name, raw)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: tables)")
	cf.register(cmd)
	tf.register(cmd)
	return cmd
}

func newDrillEndCommand() *cobra.Command {
	var cf clientFlags
	var moveBack, wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "end ID [--move-back]",
		Short: "End a drill: uncordon its clusters and, with --move-back, move its work back",
		Long: `End a drill: the clusters it cordoned are uncordoned (a cluster that was
cordoned before the drill stays so). With --move-back each runnable it
moved is asked a planned move back to the cluster it came from, which the
drill's report follows (BACK); --wait (the default) prints each one as it
ends. A drill still Running may be ended (its moves go on), but not with
--move-back; one ended already is refused (409). Admins only.`,
		Example: "  purser drill end 3 --move-back",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			out := stdout(cmd)
			d, err := c.EndDrill(cmd.Context(), args[0], moveBack)
			if err != nil {
				return named(c, err)
			}
			e := d.Status.End
			fmt.Fprintf(out, "drill %s ended: uncordoned %s\n", d.Metadata.Name, listOrNone(e.Uncordoned))
			if !moveBack {
				return nil
			}
			back := 0
			for _, o := range d.Status.Runnables {
				if o.Back != nil && o.Back.AskedAt != nil {
					back++
				}
			}
			fmt.Fprintf(out, "%d moves back asked\n", back)
			if !wait {
				return nil
			}
			d, err = followDrill(cmd.Context(), c, d, timeout, out, func(o v1alpha1.DrillOutcome) (string, string) {
				if o.Back == nil {
					return "", ""
				}
				return o.Back.Step, o.Back.Error
			})
			if err != nil {
				return named(c, err)
			}
			t := d.Status.Totals
			fmt.Fprintf(out, "moved back %d, %d failed\n", t.MovedBack, t.FailedBack)
			if t.FailedBack > 0 {
				return fmt.Errorf("drill %s: %d moves back did not happen; see purser drill get %s", d.Metadata.Name, t.FailedBack, d.Metadata.Name)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&moveBack, "move-back", false, "move each runnable the drill moved back to where it was, by planned moves")
	cmd.Flags().BoolVar(&wait, "wait", true, "with --move-back: print each move back as it ends and wait for the last")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "how long --wait waits")
	cf.register(cmd)
	return cmd
}
