package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "purser",
		Short: "Reliable submission and bookkeeping for a farm of Kubernetes clusters",
		Long: `purser places work (Jobs, Argo Workflows, FlinkDeployments) and configuration
(ConfigMaps, Secrets) on a farm of Kubernetes clusters, keeps an audited
history of every change, an inventory of what runs where, and fails work over
to a healthy cluster when a cluster or an application fails.

The control-plane components are subcommands of this one binary; "purser up"
runs all of them in one process.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newVersionCommand(),
		newSandboxCommand(),
		newUpCommand(),
		newAPICommand(),
		newApplyCommand(),
		newGetCommand(),
		newDescribeCommand(),
		newDeleteCommand(),
		newDecideCommand("approve"),
		newDecideCommand("reject"),
		newHistoryCommand(),
		newRolloutCommand(),
		newDiffCommand(),
		newFailoverCommand(),
		newLoginCommand(),
		newLogoutCommand(),
		newHealthCommand(),
		newInventoryCommand(),
		newKubeconfigCommand(),
		newConfigCommand(),
		newTokenCommand(),
		newPolicyCommand(),
		newLabelCommand(),
		newTaintCommand(),
		newCordonCommand("cordon"),
		newDrainCommand(),
		newMoveCommand(),
		newDrillCommand(),
		newCordonCommand("uncordon"),
		newScheduleCommand(),
		newTriggerCommand(),
	)
	root.AddCommand(newOperateCommands()...)
	root.AddCommand(newComponentCommands()...)
	acceptGlobalFlags(root)
	return root
}

// acceptGlobalFlags lets the flags most commands share come before the
// command, as kubectl's do (`purser -v get cl`, `purser -n team-a get
// rn`). Each command keeps its own copy of them (clientFlags and its
// -n); the root declares them too, hidden, so that the command line is
// split at the right word, and a command that has no such flag says so
// instead of ignoring it.
func acceptGlobalFlags(root *cobra.Command) {
	fl := root.PersistentFlags()
	var s string
	var b bool
	for _, name := range []string{"server", "token", "context"} {
		fl.StringVar(&s, name, "", "")
		_ = fl.MarkHidden(name)
	}
	fl.StringVarP(&s, "namespace", "n", "", "")
	fl.BoolVarP(&b, "verbose", "v", false, "")
	_ = fl.MarkHidden("namespace")
	_ = fl.MarkHidden("verbose")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		var wrong []string
		cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) {
			if f.Changed && root.PersistentFlags().Lookup(f.Name) == f {
				wrong = append(wrong, "--"+f.Name)
			}
		})
		if len(wrong) > 0 {
			return fmt.Errorf("%s: not a flag of %q (see %s --help)", strings.Join(wrong, ", "), cmd.CommandPath(), cmd.CommandPath())
		}
		return nil
	}
}
