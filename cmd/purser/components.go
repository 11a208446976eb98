package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// The control-plane components of DESIGN.md, one subcommand each. Each is
// wired here as its package lands; until then the subcommand says so
// instead of pretending to run.
var components = []struct{ name, short string }{
	{"submitter", "Places runnables on clusters from the submissions work queue, with retries"},
	{"syncer", "Keeps deployables identical on every matching cluster and repairs drift"},
	{"agent", "Runs beside one member cluster: events, snapshots, heartbeats, self-fencing"},
	{"ingester", "Keeps the inventory from agents' events and snapshots; removes zombies"},
	{"controller", "Cluster and application health, taints, failover with preserved state"},
}

func newComponentCommands() []*cobra.Command {
	var cmds []*cobra.Command
	for _, c := range components {
		cmds = append(cmds, &cobra.Command{
			Use:   c.name,
			Short: c.short + " (not in this build yet)",
			Args:  cobra.NoArgs,
			RunE: func(*cobra.Command, []string) error {
				return fmt.Errorf("purser %s is not in this build yet; `purser sandbox up` runs local clusters", c.name)
			},
		})
	}
	return cmds
}
