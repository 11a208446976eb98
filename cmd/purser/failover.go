package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/cli/printer"
)

func newFailoverCommand() *cobra.Command {
	var cf clientFlags
	var namespace string
	var confirmStopped bool
	cmd := &cobra.Command{
		Use:   "failover runnable NAME --confirm-stopped",
		Short: "Move an AtMostOne runnable off a cluster that cannot confirm its copy stopped, on your word",
		Long: `A runnable with consistency AtMostOne is moved off a failed cluster only once
its copy there is known to have stopped: its agent suspended it, or the
cluster answers again. When nobody can know (the cluster's API server does
not answer, so its agent cannot stop the copy either), the runnable waits,
and its message says so. If you made sure the copy no longer runs (the
cluster is powered off, its nodes are gone, you stopped the pods by hand),
--confirm-stopped says so: the controller moves the runnable at once. The
confirmation is in the audit log under your name. Refused (409) when the
runnable is not waiting for that.`,
		Example: `  purser failover runnable nightly-report -n team-a --confirm-stopped`,
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := oneNamed(args)
			if err != nil {
				return err
			}
			if t.res.Kind != v1alpha1.KindRunnable {
				return fmt.Errorf("only runnables fail over this way; a %s follows its placement on every cluster", t.res.Singular())
			}
			if !confirmStopped {
				return errors.New("say --confirm-stopped: the override is your word that the copy on the unreachable cluster no longer runs")
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			var out client.Object
			q := url.Values{"confirmStopped": {"true"}}
			if _, err := c.Do(cmd.Context(), http.MethodPost, t.res.Path(namespace, t.name)+"/failover", q, nil, "", &out); err != nil {
				return named(c, err)
			}
			fmt.Fprintf(stdout(cmd), "runnable/%s/%s: %s\n", namespace, t.name, printer.Field(out, "status", "message"))
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	cmd.Flags().BoolVar(&confirmStopped, "confirm-stopped", false, "you made sure the copy on the unreachable cluster no longer runs")
	cf.register(cmd)
	return cmd
}
