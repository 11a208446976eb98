package main

import (
	"net/url"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/cli/printer"
)

func newDescribeCommand() *cobra.Command {
	var cf clientFlags
	var namespace string
	cmd := &cobra.Command{
		Use:   "describe KIND NAME",
		Short: "Show one object in detail, with its recent history",
		Long: `Show one object in detail: a runnable with its attempts, a deployable with
the state of each cluster's copy, a cluster with its Ready condition (and its
reason), its taints (those set on it and those purser added) and its agent's
reports; then the object's history from the audit log, as kubectl shows
events.`,
		Example: `  purser describe runnable nightly-report -n team-a
  purser describe cluster sandbox-1`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := oneNamed(args)
			if err != nil {
				return err
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			obj, err := c.Get(cmd.Context(), t.res, namespace, t.name)
			if err != nil {
				return named(c, err)
			}
			// A user who may read the object but not its history still
			// gets the object.
			q := url.Values{"kind": {t.res.Kind}, "name": {t.name}}
			if t.res.Namespaced {
				q.Set("namespace", namespace)
			}
			history, err := c.List(cmd.Context(), "/api/v1/history", q, 0)
			if err == nil && history == nil {
				history = []printer.Object{}
			}
			return printer.Describe(stdout(cmd), t.res.Kind, obj, history)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	cf.register(cmd)
	return cmd
}
