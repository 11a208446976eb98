package main

import (
	"context"
	"net/http"
	"net/url"
	"slices"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/cli/printer"
	"github.com/purser-io/purser/internal/domain/kinds"
)

func newDescribeCommand() *cobra.Command {
	var cf clientFlags
	var namespace string
	cmd := &cobra.Command{
		Use:   "describe KIND NAME",
		Short: "Show one object in detail, with its recent history",
		Long: `Show one object in detail: a runnable with its attempts, a deployable with
the state of each cluster's copy, a cluster with its Ready condition (and its
reason), its taints (those set on it and those purser added) and its agent's
reports; a runnable's current attempt with its pods, from the inventory
(on clusters that track Pods); then the object's history from the audit log, as kubectl shows
events.`,
		Example: `  purser describe runnable nightly-report -n team-a
  purser describe cluster sandbox-1`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := oneNamed(args)
			if err != nil {
				return err
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			obj, err := c.Get(cmd.Context(), t.res, namespace, t.name)
			if err != nil {
				return named(c, err)
			}
			// A user who may read the object but not its history still
			// gets the object.
			q := url.Values{"kind": {t.res.Kind}, "name": {t.name}}
			if t.res.Namespaced {
				q.Set("namespace", namespace)
			}
			history, err := c.List(cmd.Context(), "/api/v1/history", q, 0)
			if err == nil && history == nil {
				history = []printer.Object{}
			}
			var pods *printer.AttemptPods
			if t.res.Kind == v1alpha1.KindRunnable {
				pods = attemptPods(cmd.Context(), c, obj)
			}
			return printer.DescribeWithPods(stdout(cmd), t.res.Kind, obj, history, pods)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	cf.register(cmd)
	return cmd
}

// attemptPods reads from the inventory the pods of obj's current attempt:
// the Pod records of the attempt's cluster and namespace owned by the
// attempt's object (its uid; a Job's pods also carry it in the label
// batch.kubernetes.io/controller-uid, which selects them in the
// database). nil when the runnable has no attempt with an object, or the
// inventory cannot be read.
func attemptPods(ctx context.Context, c *client.Client, obj printer.Object) *printer.AttemptPods {
	attempts, _ := printer.Lookup(obj, "status", "attempts").([]any)
	if len(attempts) == 0 {
		return nil
	}
	last, _ := attempts[len(attempts)-1].(map[string]any)
	uid, cluster := printer.Field(last, "uid"), printer.Field(last, "cluster")
	if uid == "" || cluster == "" {
		return nil
	}
	q := url.Values{"cluster": {cluster}, "apiVersion": {"v1"}, "kind": {"Pod"}, "namespace": {printer.Field(obj, "metadata", "namespace")}}
	tmpl, _ := printer.Lookup(obj, "spec", "template").(map[string]any)
	if sel := kinds.Default().PodSelector(kinds.GroupKindOf(tmpl), uid); sel != "" {
		q.Set("labelSelector", sel)
	}
	records, err := c.List(ctx, "/api/v1/inventory", q, 0)
	if err != nil {
		return nil
	}
	out := &printer.AttemptPods{Attempt: printer.Field(last, "number"), Cluster: cluster, Tracked: true}
	for _, rec := range records {
		refs, _ := printer.Lookup(rec, "object", "metadata", "ownerReferences").([]any)
		for _, r := range refs {
			if ref, _ := r.(map[string]any); printer.Field(ref, "uid") == uid {
				out.Pods = append(out.Pods, rec)
				break
			}
		}
	}
	if len(out.Pods) == 0 {
		// Whether the cluster tracks Pods at all, to say so.
		var cl v1alpha1.Cluster
		if _, err := c.Do(ctx, http.MethodGet, "/api/v1/clusters/"+url.PathEscape(cluster), nil, nil, "", &cl); err == nil {
			out.Tracked = slices.Contains(cl.Spec.InventoryKindsOf(), "Pod")
		}
	}
	return out
}
