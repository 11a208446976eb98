package main

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/cli/client"
)

// newScheduleCommand is `purser schedule`: what is done to a schedule
// beside apply, get, describe and delete.
func newScheduleCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Act on a schedule: run it once now",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newScheduleRunCommand())
	return cmd
}

func newScheduleRunCommand() *cobra.Command {
	var cf clientFlags
	var namespace string
	cmd := &cobra.Command{
		Use:   "run NAME",
		Short: "Create one run of a schedule now, whatever its timetable",
		Long: `Run creates one runnable from the schedule's template now, named
NAME-manual-<unix seconds> and labelled ` + v1alpha1.LabelSchedule + `=NAME, with your rights
(you need write in the namespace), whatever the schedule's timetable,
suspension or concurrency policy. It is audited, and waits for approval
where the namespace requires it (docs/schedules.md).`,
		Example: "  purser schedule run nightly-report -n team-a",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			r, _ := client.ResourceOfKind(v1alpha1.KindSchedule)
			var out struct {
				Metadata struct{ Namespace, Name string } `json:"metadata"`
				Status   struct{ Phase string }           `json:"status"`
			}
			if _, err := c.Do(cmd.Context(), http.MethodPost, r.Path(namespace, args[0])+"/run", nil, nil, "", &out); err != nil {
				return named(c, err)
			}
			fmt.Fprintf(stdout(cmd), "runnable/%s/%s created by schedule %s: %s\n", out.Metadata.Namespace, out.Metadata.Name, args[0], out.Status.Phase)
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	return cmd
}
