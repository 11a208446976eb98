package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/api/v1alpha1"
)

func newDescribeCommand() *cobra.Command {
	var cf clientFlags
	var namespace string
	cmd := &cobra.Command{
		Use:   "describe KIND NAME",
		Short: "Show one object in detail, with its recent history",
		Example: `  purser describe runnable nightly-report -n team-a
  purser describe cluster sandbox-1`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, name, err := kindAndName(args, true)
			if err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			var obj map[string]any
			if _, err := c.Do(cmd.Context(), http.MethodGet, objectPath(k, namespace, name), nil, nil, "", &obj); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			describe(w, k, obj)
			// Recent history of the object, as kubectl shows events; a user
			// who may not read it still gets the object.
			q := url.Values{"kind": {k.kind}, "name": {name}}
			if k.namespaced {
				q.Set("namespace", namespace)
			}
			var hist struct {
				Items []map[string]any `json:"items"`
			}
			if _, err := c.Do(cmd.Context(), http.MethodGet, "/api/v1/history", q, nil, "", &hist); err == nil {
				fmt.Fprintln(w, "History:")
				if len(hist.Items) == 0 {
					fmt.Fprintln(w, "  <none>")
				}
				tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
				for _, e := range hist.Items {
					fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", field(e, "time"), field(e, "actor"), field(e, "action"), field(e, "summary"))
				}
				tw.Flush()
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	cf.register(cmd)
	return cmd
}

func describe(w io.Writer, k kindInfo, obj map[string]any) {
	line := func(label, value string) {
		if value != "" {
			fmt.Fprintf(w, "%-14s %s\n", label+":", value)
		}
	}
	line("Name", field(obj, "metadata", "name"))
	line("Namespace", field(obj, "metadata", "namespace"))
	line("UID", field(obj, "metadata", "uid"))
	if labels, _ := lookup(obj, "metadata", "labels").(map[string]any); len(labels) > 0 {
		line("Labels", joinLabels(labels))
	}
	line("Created", field(obj, "metadata", "creationTimestamp"))
	switch k.kind {
	case v1alpha1.KindRunnable:
		line("Template", field(obj, "spec", "template", "apiVersion")+" "+field(obj, "spec", "template", "kind"))
		line("Phase", field(obj, "status", "phase"))
		line("Cluster", field(obj, "status", "cluster"))
		line("Health", field(obj, "status", "health"))
		line("Message", field(obj, "status", "message"))
		line("Submitted by", field(obj, "status", "submittedBy"))
		line("Approved by", field(obj, "status", "approvedBy"))
		line("Deadline", field(obj, "spec", "deadline"))
		if p, _ := lookup(obj, "status", "preserved").(map[string]any); len(p) > 0 {
			line("Preserved", joinLabels(p))
		}
		if rp := field(obj, "status", "restorePoint", "path"); rp != "" {
			line("Restore point", fmt.Sprintf("%s (%s from attempt %s, %s)", rp, field(obj, "status", "restorePoint", "kind"),
				field(obj, "status", "restorePoint", "attempt"), field(obj, "status", "restorePoint", "source")))
		}
		attempts, _ := lookup(obj, "status", "attempts").([]any)
		fmt.Fprintln(w, "Attempts:")
		if len(attempts) == 0 {
			fmt.Fprintln(w, "  <none>")
		}
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		for _, a := range attempts {
			m, _ := a.(map[string]any)
			fmt.Fprintf(tw, "  #%s\t%s\t%s\t%s\t%s\t%s\n", field(m, "number"), field(m, "cluster"),
				field(m, "startedAt"), orNone(field(m, "endedAt")), field(m, "result"), field(m, "reason"))
		}
		tw.Flush()
		// The chain of restore points across failovers: what each attempt
		// started from, what it reported, and why that was not carried on.
		for _, a := range attempts {
			m, _ := a.(map[string]any)
			if c, _ := m["carriedIn"].(map[string]any); len(c) > 0 {
				fmt.Fprintf(w, "  #%s carried in: %s\n", field(m, "number"), joinLabels(c))
			}
			if r, _ := m["reported"].(map[string]any); len(r) > 0 {
				fmt.Fprintf(w, "  #%s reported:   %s\n", field(m, "number"), joinLabels(r))
			}
			if n := field(m, "note"); n != "" {
				fmt.Fprintf(w, "  #%s note:       %s\n", field(m, "number"), n)
			}
		}
	case v1alpha1.KindDeployable:
		line("Template", field(obj, "spec", "template", "apiVersion")+" "+field(obj, "spec", "template", "kind"))
		line("Generation", field(obj, "status", "generation"))
		line("Phase", field(obj, "status", "phase"))
		clusters, _ := lookup(obj, "status", "clusters").([]any)
		fmt.Fprintln(w, "Clusters:")
		if len(clusters) == 0 {
			fmt.Fprintln(w, "  <none yet>")
		}
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		for _, c := range clusters {
			m, _ := c.(map[string]any)
			fmt.Fprintf(tw, "  %s\t%s\tgeneration %s\t%s\t%s\n", field(m, "cluster"), field(m, "state"),
				field(m, "syncedGeneration"), field(m, "lastSyncedAt"), field(m, "message"))
		}
		tw.Flush()
	case v1alpha1.KindCluster:
		line("Ready", orUnknown(readyStatus(obj)))
		taints, _ := lookup(obj, "spec", "taints").([]any)
		for _, t := range taints {
			m, _ := t.(map[string]any)
			line("Taint", fmt.Sprintf("%s=%s:%s", field(m, "key"), field(m, "value"), field(m, "effect")))
		}
		line("Heartbeat", field(obj, "status", "agent", "lastHeartbeat"))
		line("Snapshot", field(obj, "status", "agent", "lastSnapshot"))
		line("Objects", field(obj, "status", "inventory", "objects"))
	}
}

func newDeleteCommand() *cobra.Command {
	var cf clientFlags
	var namespace string
	cmd := &cobra.Command{
		Use:   "delete KIND NAME",
		Short: "Cancel a runnable, delete a deployable everywhere, or remove a cluster",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, name, err := kindAndName(args, true)
			if err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			var out map[string]any
			if _, err := c.Do(cmd.Context(), http.MethodDelete, objectPath(k, namespace, name), nil, nil, "", &out); err != nil {
				return err
			}
			switch k.kind {
			case v1alpha1.KindRunnable:
				fmt.Fprintf(cmd.OutOrStdout(), "runnable/%s/%s %s\n", namespace, name, strings.ToLower(field(out, "status", "phase")))
			case v1alpha1.KindDeployable:
				if field(out, "status", "phase") == string(v1alpha1.PhasePendingApproval) {
					fmt.Fprintf(cmd.OutOrStdout(), "deployable/%s/%s deletion waits for approval\n", namespace, name)
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "deployable/%s/%s deleted; it is being removed from every cluster\n", namespace, name)
				}
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "cluster/%s removed\n", name)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	cf.register(cmd)
	return cmd
}

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
			k, name, err := kindAndName(args, true)
			if err != nil {
				return err
			}
			if !k.namespaced {
				return fmt.Errorf("only runnables and deployables wait for approval")
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			var cur map[string]any
			if _, err := c.Do(cmd.Context(), http.MethodGet, objectPath(k, namespace, name), nil, nil, "", &cur); err != nil {
				return err
			}
			rv := field(cur, "status", "pendingChange", "resourceVersion")
			if rv == "" {
				return fmt.Errorf("%s/%s/%s has no change waiting for approval", strings.ToLower(k.kind), namespace, name)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "deciding on the change by %s (resourceVersion %s)\n", field(cur, "status", "pendingChange", "author"), rv)
			var out map[string]any
			if _, err := c.Do(cmd.Context(), http.MethodPost, objectPath(k, namespace, name)+"/"+verb, url.Values{"resourceVersion": {rv}}, nil, "", &out); err != nil {
				return err
			}
			state := field(out, "status", "phase")
			if state == "" {
				state = field(out, "status")
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s/%s %sed (%s)\n", strings.ToLower(k.kind), namespace, name, strings.TrimSuffix(verb, "e"), state)
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace")
	cf.register(cmd)
	return cmd
}

func newHistoryCommand() *cobra.Command {
	var cf clientFlags
	var namespace, kind, name, actor, action, since, until, output string
	var verify bool
	var limit int
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Who changed what, and when: the audit log",
		Long: `Print audit entries, oldest first. Every change, approval, placement,
eviction and failover is there. --verify walks the hash chain and reports the
first broken link, if any; it also checks the chain against the heads the api
signed and published to the stream (AUDIT), and that record itself, so that a
chain rewritten in the database with its hashes recomputed, a forged or
missing head, or a deleted or recreated stream does not pass. With the
api's public key in the client config (auditKey, which purser up writes) or
in $PURSER_AUDIT_KEY, it also checks the newest head's signature itself.
It exits non-zero whenever the verification fails.`,
		Example: `  purser history -n team-a --name nightly-report
  purser history --actor alice --since 2026-11-01T00:00:00Z
  purser history --verify`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if verify {
				return verifyHistory(cmd.Context(), c, w)
			}
			q := url.Values{}
			for k, v := range map[string]string{"namespace": namespace, "kind": kind, "name": name, "actor": actor, "action": action, "since": since, "until": until} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if kind != "" {
				k, err := parseKind(kind)
				if err != nil {
					return err
				}
				q.Set("kind", k.kind)
			}
			items, err := listAll(cmd.Context(), c, "/api/v1/history", q, limit)
			if err != nil {
				return err
			}
			if output == "json" || output == "yaml" {
				return printStructured(w, output, map[string]any{"items": items})
			}
			tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tTIME\tACTOR\tACTION\tOBJECT\tOUTCOME\tSUMMARY")
			for _, e := range items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", field(e, "seq"), field(e, "time"), field(e, "actor"),
					field(e, "action"), field(e, "object"), field(e, "outcome"), field(e, "summary"))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "only this namespace (default: every namespace you may read)")
	cmd.Flags().StringVar(&kind, "kind", "", "only this kind: runnables, deployables or clusters")
	cmd.Flags().StringVar(&name, "name", "", "only objects of this name")
	cmd.Flags().StringVar(&actor, "actor", "", "only changes by this user")
	cmd.Flags().StringVar(&action, "action", "", "only this action: create, update, delete, cancel, approve, reject, ...")
	cmd.Flags().StringVar(&since, "since", "", "only entries at or after this RFC 3339 time")
	cmd.Flags().StringVar(&until, "until", "", "only entries before this RFC 3339 time")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: yaml or json")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many entries")
	cmd.Flags().BoolVar(&verify, "verify", false, "check the hash chain instead of listing")
	cf.register(cmd)
	cmd.AddCommand(newRestartAnchorsCommand())
	return cmd
}
