package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/cli/client"
)

// newScheduleCommand is `purser schedule`: what is done to a schedule
// beside apply, get, describe and delete.
func newScheduleCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Act on a schedule: run it once now, or backfill the ticks of an interval",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newScheduleRunCommand(), newScheduleBackfillCommand())
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

func newScheduleBackfillCommand() *cobra.Command {
	var cf clientFlags
	var namespace, from, to string
	cmd := &cobra.Command{
		Use:   "backfill NAME --from T --to T",
		Short: "Run the ticks of a past interval of a schedule now",
		Long: `Backfill runs the schedule's ticks in [--from, --to] (RFC 3339, --to not in
the future, at most ` + fmt.Sprint(v1alpha1.MaxBackfillTicks) + ` ticks) now, with your rights (you need write in the
namespace), each under the name the timetable gives it (NAME-<unix minutes>),
so that a tick already run, by the timetable or an earlier backfill, is not
run again. The concurrency policy holds as at a tick: Forbid skips a tick
while a run is active, Replace cancels the active run. It is audited, and
its runs wait for approval where the namespace requires it. One line is
printed per tick (docs/schedules.md).`,
		Example: "  purser schedule backfill nightly-report -n team-a --from 2026-12-01T00:00:00Z --to 2026-12-06T23:59:59Z",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var body v1alpha1.ScheduleBackfill
			var err error
			if body.From, err = time.Parse(time.RFC3339, from); err != nil {
				return fmt.Errorf("--from %q is not an RFC 3339 time (e.g. 2026-12-01T00:00:00Z)", from)
			}
			if body.To, err = time.Parse(time.RFC3339, to); err != nil {
				return fmt.Errorf("--to %q is not an RFC 3339 time (e.g. 2026-12-01T00:00:00Z)", to)
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			r, _ := client.ResourceOfKind(v1alpha1.KindSchedule)
			data, err := json.Marshal(body)
			if err != nil {
				return err
			}
			var out v1alpha1.ScheduleBackfillResult
			if _, err := c.Do(cmd.Context(), http.MethodPost, r.Path(namespace, args[0])+"/backfill", nil, data, "application/json", &out); err != nil {
				return named(c, err)
			}
			w := stdout(cmd)
			for _, t := range out.Ticks {
				switch t.Outcome {
				case v1alpha1.BackfillRun:
					fmt.Fprintf(w, "%s  runnable/%s/%s created: %s\n", t.Tick.UTC().Format(time.RFC3339), namespace, t.Name, t.Phase)
				case v1alpha1.BackfillSkipped:
					fmt.Fprintf(w, "%s  skipped: %s\n", t.Tick.UTC().Format(time.RFC3339), t.Message)
				default:
					fmt.Fprintf(w, "%s  already done: %s\n", t.Tick.UTC().Format(time.RFC3339), t.Message)
				}
			}
			fmt.Fprintf(w, "schedule %s backfilled: %d run, %d skipped, %d already done\n", args[0], out.Run, out.Skipped, out.AlreadyDone)
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	cmd.Flags().StringVar(&from, "from", "", "first instant of the interval (RFC 3339)")
	cmd.Flags().StringVar(&to, "to", "", "last instant of the interval (RFC 3339), not in the future")
	_ = cmd.MarkFlagRequired("from")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}
