package main

import (
	"github.com/spf13/cobra"
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
		newCordonCommand("uncordon"),
	)
	root.AddCommand(newOperateCommands()...)
	root.AddCommand(newComponentCommands()...)
	return root
}
