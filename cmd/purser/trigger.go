package main

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/cli/client"
)

// newTriggerCommand is `purser trigger`: what is done to a trigger
// beside apply, get, describe and delete.
func newTriggerCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trigger",
		Short: "Act on a trigger: give its webhook a new token",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newTriggerRotateTokenCommand())
	return cmd
}

func newTriggerRotateTokenCommand() *cobra.Command {
	var cf clientFlags
	var namespace string
	cmd := &cobra.Command{
		Use:   "rotate-token NAME",
		Short: "Give a webhook trigger a new token; the old one stops working",
		Long: `Rotate-token issues a new token for the trigger's webhook and prints it,
once: purser keeps only its SHA-256. The old token is refused from the
same moment. You need write in the namespace; it is audited
(docs/triggers.md).`,
		Example: "  purser trigger rotate-token deploy-hook -n team-a",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			r, _ := client.ResourceOfKind(v1alpha1.KindTrigger)
			var out struct {
				Status struct{ Token, WebhookPath string } `json:"status"`
			}
			if _, err := c.Do(cmd.Context(), http.MethodPost, r.Path(namespace, args[0])+"/rotate-token", nil, nil, "", &out); err != nil {
				return named(c, err)
			}
			fmt.Fprintf(stdout(cmd), "trigger/%s/%s: new webhook token (shown once; keep it): %s\nPOST %s with Authorization: Bearer <token>\n",
				namespace, args[0], out.Status.Token, out.Status.WebhookPath)
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	return cmd
}
