package main

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/cli/printer"
)

func newInventoryCommand() *cobra.Command {
	var cf clientFlags
	var tf tableFlags
	var namespace, cluster, apiVersion, kind, name, selector, health, output string
	var all, meta bool
	var limit int
	cmd := &cobra.Command{
		Use:     "inventory",
		Aliases: []string{"inv"},
		Short:   "Search what runs where, from purser's inventory (never from the clusters)",
		Long: `List the objects purser's agents track in the member clusters, answered from
purser's database: it works while a cluster is down, and says how fresh each
cluster's records are.`,
		Example: `  purser inventory -n team-a --kind Job
  purser inventory -A -l app=web --health Unhealthy
  purser inventory -A --cluster sandbox-1 -o wide`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := printer.ParseFormat(output, printer.OutputWide, printer.OutputYAML, printer.OutputJSON)
			if err != nil {
				return err
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			q := url.Values{}
			for k, v := range map[string]string{"cluster": cluster, "apiVersion": apiVersion, "kind": kind, "name": name,
				"labelSelector": selector, "health": health} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if !all {
				q.Set("namespace", namespace)
			}
			if meta || format.Table() {
				q.Set("fields", "meta")
			}
			var items []map[string]any
			fresh := map[string]map[string]any{}
			for {
				var page struct {
					Items    []map[string]any `json:"items"`
					Continue string           `json:"continue"`
					Clusters []map[string]any `json:"clusters"`
				}
				if _, err := c.Do(cmd.Context(), http.MethodGet, "/api/v1/inventory", q, nil, "", &page); err != nil {
					return named(c, err)
				}
				items = append(items, page.Items...)
				for _, f := range page.Clusters {
					fresh[printer.Field(f, "cluster")] = f
				}
				if page.Continue == "" || (limit > 0 && len(items) >= limit) {
					break
				}
				q.Set("continue", page.Continue)
			}
			if limit > 0 && len(items) > limit {
				items = items[:limit]
			}
			w := tf.out(cmd, format.Table())
			if !format.Table() {
				return printer.Structured(w, format.Name, map[string]any{"items": items, "clusters": fresh})
			}
			if err := printer.Inventory(w, items, format.Name == printer.OutputWide); err != nil {
				return err
			}
			// Say plainly when an answer comes from a cluster whose
			// records are not fresh, in the API's words (its freshness
			// judgement, v1alpha1.JudgeFreshness), not the CLI's own.
			for name, f := range fresh {
				if fr, _ := printer.Lookup(f, "freshness").(map[string]any); fr != nil && fr["fresh"] != true {
					fmt.Fprintf(cmd.ErrOrStderr(), "note: the records of cluster %s may be stale: %s\n", name, printer.Field(fr, "message"))
				} else if f["ready"] != true {
					fmt.Fprintf(cmd.ErrOrStderr(), "note: cluster %s is not ready; its records may be stale\n", name)
				}
			}
			if len(items) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No objects match.")
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "every namespace")
	cmd.Flags().StringVar(&cluster, "cluster", "", "only this cluster")
	cmd.Flags().StringVar(&apiVersion, "api-version", "", "only this apiVersion, e.g. batch/v1")
	cmd.Flags().StringVar(&kind, "kind", "", "only this kind, e.g. Job")
	cmd.Flags().StringVar(&name, "name", "", "only objects of this name")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector, e.g. app=web,tier in (prod)")
	cmd.Flags().StringVar(&health, "health", "", "only Healthy, Unhealthy or Unknown")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, yaml or json (yaml and json include the objects)")
	cmd.Flags().BoolVar(&meta, "meta", false, "with -o yaml|json: leave the objects out")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many records")
	tf.register(cmd)
	cf.register(cmd)
	return cmd
}
