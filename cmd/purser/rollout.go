package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/cli/printer"
)

// newRolloutCommand is `purser rollout status|pause|resume|rollback|
// approve|history DEPLOYABLE`, read as kubectl's rollout verbs.
func newRolloutCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Follow and steer a deployable's rollout in waves",
		Long: `A deployable with spec.rollout reaches its clusters wave by wave. These
commands show where its rollout stands (status), stop it where it is
(pause), let it go on or retry it after a halt or a rollback (resume),
return every cluster to the previous generation (rollback), let the next
wave start when the rollout waits for an approver (approve), and list
every step (history).`,
	}
	cmd.AddCommand(rolloutStatusCommand(), rolloutHistoryCommand(), rolloutApproveCommand())
	for _, verb := range []string{"pause", "resume", "rollback"} {
		cmd.AddCommand(rolloutControlCommand(verb))
	}
	return cmd
}

func deployables() client.Resource {
	r, err := client.ParseResource("deployables")
	if err != nil {
		panic(err) // a resource every purser knows
	}
	return r
}

func rolloutStatusCommand() *cobra.Command {
	var cf clientFlags
	var namespace string
	cmd := &cobra.Command{
		Use:     "status DEPLOYABLE",
		Short:   "Where the rollout of a deployable's generation stands, per wave and cluster",
		Example: "  purser rollout status app-config -n team-a",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			obj, err := c.Get(cmd.Context(), deployables(), namespace, args[0])
			if err != nil {
				return named(c, err)
			}
			return printRollout(stdout(cmd), obj)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	cf.register(cmd)
	return cmd
}

func printRollout(w interface{ Write([]byte) (int, error) }, obj client.Object) error {
	ro, _ := printer.Lookup(obj, "status", "rollout").(map[string]any)
	if ro == nil {
		if _, ok := printer.Lookup(obj, "spec", "rollout").(map[string]any); !ok {
			return errors.New("this deployable has no spec.rollout: every change reaches every cluster at once")
		}
		_, err := fmt.Fprintln(w, "no decision yet: the syncer has not looked at this generation")
		return err
	}
	f := func(path ...string) string { return printer.Field(ro, path...) }
	fmt.Fprintf(w, "generation %s (previous %s): %s at wave %s", f("generation"), f("previousGeneration"), f("state"), f("wave"))
	if r := f("reason"); r != "" {
		fmt.Fprintf(w, " (%s)", r)
	}
	fmt.Fprintln(w)
	if m := f("message"); m != "" {
		fmt.Fprintln(w, m)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tWAVE\tGENERATION\tFALLBACK\tAPPLIED\tHEALTH\tSINCE\tMESSAGE")
	list, _ := ro["clusters"].([]any)
	for _, it := range list {
		m, _ := it.(map[string]any)
		g := func(k string) string { return printer.Field(m, k) }
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g("cluster"), g("wave"), g("generation"), g("fallbackGeneration"), g("generationApplied"), g("health"), g("since"), g("message"))
	}
	return tw.Flush()
}

func rolloutControlCommand(verb string) *cobra.Command {
	var cf clientFlags
	var namespace string
	short := map[string]string{
		"pause":    "Stop the rollout where it is: no further cluster gets the generation",
		"resume":   "Let a paused rollout go on, or retry a halted or rolled back one",
		"rollback": "Return every cluster of the rollout to the previous generation",
	}[verb]
	cmd := &cobra.Command{
		Use:     verb + " DEPLOYABLE",
		Short:   short,
		Example: "  purser rollout " + verb + " app-config -n team-a",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			var out client.Object
			if _, err := c.Do(cmd.Context(), http.MethodPost, deployables().Path(namespace, args[0])+"/"+verb, nil, nil, "", &out); err != nil {
				return named(c, err)
			}
			fmt.Fprintf(stdout(cmd), "deployable/%s/%s: %s asked for generation %s; the syncer acts on it within a second\n",
				namespace, args[0], verb, printer.Field(out, "status", "generation"))
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	cf.register(cmd)
	return cmd
}

func rolloutApproveCommand() *cobra.Command {
	var cf clientFlags
	var namespace string
	cmd := &cobra.Command{
		Use:   "approve DEPLOYABLE",
		Short: "Let the next wave start, where the rollout waits for an approver",
		Long: `The approval binds to the generation read: if the deployable changes in
between, the server refuses (409). The approver must not be the author of
the generation.`,
		Example: "  purser rollout approve app-config -n team-a",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			cur, err := c.Get(cmd.Context(), deployables(), namespace, args[0])
			if err != nil {
				return named(c, err)
			}
			wave := printer.Field(cur, "status", "rollout", "awaitingApproval")
			gen := printer.Field(cur, "status", "rollout", "generation")
			if wave == "" {
				return fmt.Errorf("deployable/%s/%s: no wave waits for approval", namespace, args[0])
			}
			var out client.Object
			if _, err := c.Do(cmd.Context(), http.MethodPost, deployables().Path(namespace, args[0])+"/approve", url.Values{"generation": {gen}}, nil, "", &out); err != nil {
				return named(c, err)
			}
			fmt.Fprintf(stdout(cmd), "deployable/%s/%s: wave %s of generation %s approved\n", namespace, args[0], wave, gen)
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	cf.register(cmd)
	return cmd
}

func rolloutHistoryCommand() *cobra.Command {
	var cf clientFlags
	var tf tableFlags
	var namespace string
	var limit int
	cmd := &cobra.Command{
		Use:     "history DEPLOYABLE",
		Short:   "Every change and rollout step of a deployable, oldest first",
		Example: "  purser rollout history app-config -n team-a",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			q := url.Values{"namespace": {namespace}, "kind": {v1alpha1.KindDeployable}, "name": {args[0]}}
			items, err := c.List(cmd.Context(), "/api/v1/history", q, limit)
			if err != nil {
				return named(c, err)
			}
			return printer.History(tf.out(cmd, true), items)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many entries (0: all)")
	tf.register(cmd)
	cf.register(cmd)
	return cmd
}
