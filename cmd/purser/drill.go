package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/cli/printer"
)

func newDrillCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drill",
		Short: "What losing a DC or a cluster would do to the work on it (--dry-run)",
		Long:  drillLong,
	}
	cmd.AddCommand(newDrillTargetCommand(v1alpha1.DrillTargetDC, "dc NAME", "the DC whose clusters carry the label dc=NAME", "  purser drill dc dc1 --dry-run"),
		newDrillTargetCommand(v1alpha1.DrillTargetCluster, "cluster NAME", "one cluster", "  purser drill cluster dc1-a --dry-run -o json"),
		newDrillTargetCommand(v1alpha1.DrillTargetSelector, "selector SELECTOR", "the clusters a label selector picks",
			"  purser drill selector 'dc in (dc1,dc2)' --dry-run"))
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

Nothing is changed. Admins only. A real drill (cordon and planned moves)
is not available yet; see docs/drills.md.`

func newDrillTargetCommand(kind, use, what, example string) *cobra.Command {
	var cf clientFlags
	var tf tableFlags
	var output string
	var dryRun bool
	cmd := &cobra.Command{
		Use:     use + " --dry-run",
		Short:   "What losing " + what + " would do",
		Long:    "What losing " + what + " would do.\n\n" + drillLong,
		Example: example,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := printer.ParseFormat(output, printer.OutputYAML, printer.OutputJSON)
			if err != nil {
				return err
			}
			if !dryRun {
				return fmt.Errorf("a real drill (cordon and planned moves) is not available yet: ask for the what-if with --dry-run")
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			rep, raw, err := c.DrillDryRun(cmd.Context(), v1alpha1.DrillTarget{Kind: kind, Name: args[0]})
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
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "compute what would happen and change nothing (required)")
	cf.register(cmd)
	tf.register(cmd)
	return cmd
}
