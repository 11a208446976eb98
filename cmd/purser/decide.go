package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/cli/printer"
)

// newDecideCommand is approve or reject.
func newDecideCommand(verb string) *cobra.Command {
	var cf clientFlags
	var namespace string
	cmd := &cobra.Command{
		Use:   verb + " KIND NAME",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " a runnable or deployable change that waits for approval",
		Long: `Approvals need a second person: an approver in the namespace who is not
the one who made the change. The command reads the change that waits and
decides on that version of it: if its author changes it in between, the
server refuses (409) and nothing is decided.`,
		Example: "  purser " + verb + " runnable nightly-report -n team-a",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := oneNamed(args)
			if err != nil {
				return err
			}
			if !t.res.Namespaced {
				return fmt.Errorf("only runnables and deployables wait for approval")
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			cur, err := c.Get(cmd.Context(), t.res, namespace, t.name)
			if err != nil {
				return named(c, err)
			}
			// The version reviewed (status.pendingChange): the server
			// decides only on that one, and refuses a decision naming none.
			rv := printer.Field(cur, "status", "pendingChange", "resourceVersion")
			if wave := printer.Field(cur, "status", "rollout", "awaitingApproval"); rv == "" && wave != "" && verb == "approve" {
				// No change waits, but a wave of the rollout does: the
				// approval binds to the generation read.
				gen := printer.Field(cur, "status", "rollout", "generation")
				if _, err := c.Do(cmd.Context(), http.MethodPost, t.res.Path(namespace, t.name)+"/approve", url.Values{"generation": {gen}}, nil, "", nil); err != nil {
					return named(c, err)
				}
				fmt.Fprintf(stdout(cmd), "%s/%s/%s: wave %s of generation %s approved\n", t.res.Singular(), namespace, t.name, wave, gen)
				return nil
			}
			if rv == "" {
				return fmt.Errorf("%s/%s/%s has no change waiting for approval", t.res.Singular(), namespace, t.name)
			}
			// And the object reviewed: one removed and made again under
			// the name starts its versions over.
			q := url.Values{"resourceVersion": {rv}, "uid": {printer.Field(cur, "metadata", "uid")}}
			fmt.Fprintf(stderr(cmd), "deciding on the change by %s (resourceVersion %s)\n", printer.Field(cur, "status", "pendingChange", "author"), rv)
			var out client.Object
			if _, err := c.Do(cmd.Context(), http.MethodPost, t.res.Path(namespace, t.name)+"/"+verb, q, nil, "", &out); err != nil {
				return named(c, err)
			}
			state := printer.Field(out, "status", "phase")
			if state == "" {
				state = printer.Field(out, "status")
			}
			fmt.Fprintf(stdout(cmd), "%s/%s/%s %sed (%s)\n", t.res.Singular(), namespace, t.name, strings.TrimSuffix(verb, "e"), state)
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	cf.register(cmd)
	return cmd
}
