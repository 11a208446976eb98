package main

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/api/v1alpha1"
)

// diffResult is the API's answer to POST /api/v1/deployables/{ns}/{name}/diff.
type diffResult struct {
	Deployable string `json:"deployable"`
	Clusters   []struct {
		Cluster   string   `json:"cluster"`
		Create    bool     `json:"create"`
		Changes   []string `json:"changes"`
		Overrides []int    `json:"overrides"`
		Error     string   `json:"error"`
	} `json:"clusters"`
}

func newDiffCommand() *cobra.Command {
	var cf clientFlags
	var ff fileFlags
	var namespace string
	cmd := &cobra.Command{
		Use:   "diff -f FILE|DIR|- [-f ...]",
		Short: "Show what apply would change: in Runnables' specs, and per cluster for Deployables; writes nothing",
		Long: `For every Runnable of the files, the difference between its stored spec,
labels and annotations and those of the file, as a unified diff of YAML,
with the file's defaults filled in as the API fills them (so a field left
to its default is no change). A Runnable that does not exist yet is shown
as new.

For each Deployable of the files, every cluster its placement matches is
asked, by a server-side apply dry run of that cluster's object (its
spec.overrides applied), what would change. Nothing is written, neither in
purser nor on any cluster. Changes are named by field path; values are
never printed, so a Secret's stay hidden.`,
		Example: "  purser diff -f examples/runnable-job.yaml\n  purser diff -f deployable.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := ff.read(cmd)
			if err != nil {
				return err
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			nsGiven := cmd.Flags().Changed("namespace")
			w := stdout(cmd)
			for _, o := range objs {
				if o.Kind() == v1alpha1.KindRunnable {
					if err := diffRunnable(cmd, c, o, namespace, nsGiven); err != nil {
						return err
					}
					continue
				}
				if o.Kind() != v1alpha1.KindDeployable {
					fmt.Fprintf(w, "%s: %s is not compared (only Runnables and Deployables are)\n", o.Where(), o.Kind())
					continue
				}
				body, ctype, err := inNamespace(o, namespace, nsGiven)
				if err != nil {
					return fmt.Errorf("%s: %w", o.Where(), err)
				}
				ns := o.Namespace()
				if ns == "" {
					ns = namespace
				}
				var out diffResult
				if _, err := c.Do(cmd.Context(), http.MethodPost, deployables().Path(ns, o.Name())+"/diff", nil, body, ctype, &out); err != nil {
					return named(c, fmt.Errorf("%s: %w", o.Where(), err))
				}
				fmt.Fprintf(w, "deployable/%s\n", out.Deployable)
				if len(out.Clusters) == 0 {
					fmt.Fprintln(w, "  no cluster matches its placement")
				}
				for _, d := range out.Clusters {
					over := ""
					if len(d.Overrides) > 0 {
						over = fmt.Sprintf(" (overrides %v)", d.Overrides)
					}
					switch {
					case d.Error != "":
						fmt.Fprintf(w, "  %s%s: cannot tell: %s\n", d.Cluster, over, d.Error)
					case d.Create:
						fmt.Fprintf(w, "  %s%s: would be created\n", d.Cluster, over)
					case len(d.Changes) == 0:
						fmt.Fprintf(w, "  %s%s: unchanged\n", d.Cluster, over)
					default:
						fmt.Fprintf(w, "  %s%s: would change %s\n", d.Cluster, over, strings.Join(d.Changes, ", "))
					}
				}
			}
			return nil
		},
	}
	ff.register(cmd, "to compare")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of the objects that name none")
	_ = cmd.MarkFlagRequired("filename")
	cf.register(cmd)
	return cmd
}
