package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/cli/printer"
)

// listFlags select objects of a list, for get and delete.
type listFlags struct {
	namespace, selector, phase, cluster string
	all                                 bool
	limit                               int
}

func (f *listFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.namespace, "namespace", "n", "default", "namespace")
	fl.BoolVarP(&f.all, "all-namespaces", "A", false, "across every namespace")
	fl.StringVarP(&f.selector, "selector", "l", "", "only objects whose labels match this selector, as kubectl's -l: app=web,tier in (prod),!legacy")
	fl.StringVar(&f.phase, "phase", "", "runnables only: only those in this phase")
	fl.StringVar(&f.cluster, "cluster", "", "runnables only: only those on this cluster")
	fl.IntVar(&f.limit, "limit", 0, "at most this many objects of each kind (default: all, fetched in pages)")
}

// check validates the flags before anything is sent.
func (f *listFlags) check() (labels.Selector, error) {
	if f.phase != "" {
		if _, err := v1alpha1.ParseRunnablePhase(f.phase); err != nil {
			return nil, fmt.Errorf("--phase: %w", err)
		}
	}
	sel, err := labels.Parse(f.selector)
	if err != nil {
		return nil, fmt.Errorf("-l %q: %w", f.selector, err)
	}
	return sel, nil
}

// list reads the objects of a kind that the flags select.
func (f *listFlags) list(ctx context.Context, c *client.Client, r client.Resource, sel labels.Selector) ([]client.Object, error) {
	opts := client.ListOptions{Selector: sel, Phase: f.phase, Cluster: f.cluster, Limit: f.limit}
	if !f.all {
		opts.Namespace = f.namespace
	}
	return c.ListObjects(ctx, r, opts)
}

// where says which namespace a list looked in, for "No ... found".
func (f *listFlags) where(r client.Resource) string {
	if r.Namespaced && !f.all {
		return " in namespace " + f.namespace
	}
	return ""
}

func newGetCommand() *cobra.Command {
	var cf clientFlags
	var tf tableFlags
	var lf listFlags
	var output, sortBy string
	var watch bool
	cmd := &cobra.Command{
		Use:   "get [KIND[,KIND...] [NAME...] | KIND/NAME...]",
		Short: "List or show runnables, deployables, clusters, quotas or schedules",
		Long: `List objects as a table (like kubectl get), or show some by name. KIND is
runnables (rn), deployables (dp), clusters (cl), quotas (a quota is named
after its namespace and shows its usage beside each limit) or schedules
(sched: SCHEDULE, TIMEZONE, SUSPEND, ACTIVE, LAST, NEXT); several kinds are separated
by commas. Without arguments it lists the kinds. "purser get dcs" lists the
DCs (the values of the clusters' dc label) with their standing headroom:
whether the farm could absorb losing each one now, and what would be short
(the what-if of purser drill, computed on each read).

-o wide adds columns; -o yaml|json prints the objects as the API returns them
(a List for several); -o name prints kind/name, which every command taking
KIND NAME also takes; -o jsonpath=TEMPLATE prints fields, with the template
language of kubectl (applied to the object, or to a List of them).
--sort-by orders by a field (.metadata.creationTimestamp, .status.phase).
-w prints the objects, then every change as it is seen (every second) until
interrupted.`,
		Example: `  purser get runnables -n team-a
  purser get rn -A --phase Running -o wide
  purser get runnable nightly-report -n team-a -o yaml
  purser get rn -A -l app=report -o name
  purser get rn -n team-a -o jsonpath='{.items[*].status.phase}'
  purser get runnables,deployables -n team-a --sort-by .metadata.creationTimestamp
  purser get rn -n team-a -w
  purser get clusters
  purser get quotas
  purser get dcs -o wide
  purser get schedules -n team-a`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				fmt.Fprintln(stderr(cmd), "Say which kind to get, for example `purser get runnables`. The kinds:")
				return printer.Kinds(stdout(cmd), client.Resources)
			}
			format, err := printer.ParseFormat(output, printer.OutputWide, printer.OutputYAML, printer.OutputJSON, printer.OutputName, printer.OutputJSONPath)
			if err != nil {
				return err
			}
			if len(args) == 1 && slices.Contains([]string{"dcs", "dc"}, strings.ToLower(args[0])) {
				if watch {
					return errors.New("-w does not watch DCs: their headroom is computed on each read")
				}
				return getDCs(cmd, &cf, tf, format)
			}
			targets, err := parseTargets(args)
			if err != nil {
				return err
			}
			sel, err := lf.check()
			if err != nil {
				return err
			}
			if watch && len(targets) > 1 {
				return errors.New("-w watches one kind, or one object, at a time")
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			opts := printer.TableOptions{WithNamespace: lf.all}
			if watch {
				t := targets[0]
				w := printer.NewWatcher(tf.out(cmd, format.Table()), format, t.res.Kind, opts)
				read := func(ctx context.Context) ([]client.Object, error) {
					if t.name != "" {
						obj, err := c.Get(ctx, t.res, lf.namespace, t.name)
						return []client.Object{obj}, err
					}
					return lf.list(ctx, c, t.res, sel)
				}
				return named(c, client.Watch(cmd.Context(), client.WatchInterval, read, func(items []client.Object) error {
					if sortBy != "" {
						if err := printer.SortBy(items, sortBy); err != nil {
							return err
						}
					}
					return w.Print(items)
				}))
			}
			var groups []printer.Group
			single := len(targets) == 1 && targets[0].name != ""
			for _, t := range targets {
				var items []client.Object
				if t.name != "" {
					obj, err := c.Get(cmd.Context(), t.res, lf.namespace, t.name)
					if err != nil {
						return named(c, err)
					}
					items = []client.Object{obj}
				} else if items, err = lf.list(cmd.Context(), c, t.res, sel); err != nil {
					return named(c, err)
				}
				if sortBy != "" {
					if err := printer.SortBy(items, sortBy); err != nil {
						return err
					}
				}
				if len(items) == 0 && format.Table() {
					fmt.Fprintf(stderr(cmd), "No %s found%s.\n", t.res.Plural, lf.where(t.res))
				}
				groups = addGroup(groups, t.res.Kind, items)
			}
			return format.Print(tf.out(cmd, format.Table()), groups, single, opts)
		},
	}
	lf.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, yaml, json, name or jsonpath=TEMPLATE")
	cmd.Flags().StringVar(&sortBy, "sort-by", "", "order by this field, a JSONPath such as .metadata.name or .status.phase")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after the list, print each object again when it changes, until interrupted")
	tf.register(cmd)
	cf.register(cmd)
	return cmd
}

// getDCs prints GET /api/v1/dcs: each DC with whether the farm could
// absorb losing it now, and what would be short (docs/drills.md).
func getDCs(cmd *cobra.Command, cf *clientFlags, tf tableFlags, format printer.Format) error {
	c, err := cf.client(cmd)
	if err != nil {
		return err
	}
	var list struct {
		Items []client.Object `json:"items"`
	}
	if _, err := c.Do(cmd.Context(), http.MethodGet, "/api/v1/dcs", nil, nil, "", &list); err != nil {
		return named(c, err)
	}
	if len(list.Items) == 0 && format.Table() {
		fmt.Fprintln(stderr(cmd), "No DCs found: no cluster has the label dc.")
	}
	return format.Print(tf.out(cmd, format.Table()), []printer.Group{{Kind: printer.KindDC, Items: list.Items}}, false, printer.TableOptions{})
}

// addGroup adds items of a kind to groups: to the last group when it is
// of the same kind (`get rn a b` is one table), else as a new group.
func addGroup(groups []printer.Group, kind string, items []client.Object) []printer.Group {
	if n := len(groups); n > 0 && groups[n-1].Kind == kind {
		groups[n-1].Items = append(groups[n-1].Items, items...)
		return groups
	}
	return append(groups, printer.Group{Kind: kind, Items: items})
}
