package main

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/cli/printer"
)

// operations are the commands that operate a runnable already accepted:
// each is one POST to the runnable's operation endpoint.
var operations = []struct{ verb, short, long, example string }{
	{"suspend", "Suspend a running runnable by its kind's own field",
		`The runnable becomes Suspended, and purser sets its kind's own suspend field
on its cluster: a Job's spec.suspend (its pods are deleted, the Job stays),
an Argo Workflow's spec.suspend, a FlinkDeployment's spec.job.state
suspended (the operator stops the job as its upgradeMode says). Failover
leaves a Suspended runnable where it is. Other kinds are refused (422) with
the reason; a runnable that is not Submitted or Running is refused (409).`,
		`  purser suspend runnable nightly-report -n team-a`},
	{"resume", "Resume a suspended runnable",
		`The kind's suspend field is cleared on the runnable's cluster; once that is
done the runnable is Submitted again and follows its object as before.`,
		`  purser resume runnable nightly-report -n team-a`},
	{"rerun", "Run an ended runnable again, as a new attempt",
		`A Succeeded, Failed, Expired or Cancelled runnable is queued again with its
current spec, as its next attempt; the earlier attempts stay in its status
and history. You must be allowed to submit it now, you become its
submitter, and where the namespace needs approval the rerun waits for one.`,
		`  purser rerun runnable nightly-report -n team-a`},
}

func newOperateCommands() []*cobra.Command {
	cmds := make([]*cobra.Command, 0, len(operations))
	for _, op := range operations {
		var cf clientFlags
		var namespace string
		cmd := &cobra.Command{
			Use:     op.verb + " runnable NAME",
			Short:   op.short,
			Long:    op.long,
			Example: op.example,
			Args:    cobra.RangeArgs(1, 2),
			RunE: func(cmd *cobra.Command, args []string) error {
				t, err := oneNamed(args)
				if err != nil {
					return err
				}
				if t.res.Kind != v1alpha1.KindRunnable {
					return fmt.Errorf("only runnables can be %s; a %s follows its spec on every cluster", pastTense(op.verb), t.res.Singular())
				}
				c, err := cf.client(cmd)
				if err != nil {
					return err
				}
				var out client.Object
				if _, err := c.Do(cmd.Context(), http.MethodPost, t.res.Path(namespace, t.name)+"/"+op.verb, nil, nil, "", &out); err != nil {
					return named(c, err)
				}
				fmt.Fprintf(stdout(cmd), "runnable/%s/%s %s: %s\n", namespace, t.name,
					printer.Field(out, "status", "phase"), printer.Field(out, "status", "message"))
				return nil
			},
		}
		cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
		cf.register(cmd)
		cmds = append(cmds, cmd)
	}
	return cmds
}

func pastTense(verb string) string {
	return map[string]string{"suspend": "suspended", "resume": "resumed", "rerun": "rerun"}[verb]
}
