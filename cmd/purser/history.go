package main

import (
	"net/url"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/cli/printer"
)

func newHistoryCommand() *cobra.Command {
	var cf clientFlags
	var tf tableFlags
	var namespace, kind, name, actor, action, since, until, output string
	var verify, oldestFirst bool
	var limit int
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Who changed what, and when: the audit log",
		Long: `Print audit entries, newest first (--oldest-first for the order in which
they were written); --limit N prints the N newest (or, with --oldest-first,
the N oldest). Every change, approval, placement, eviction and failover is
there. --verify walks the hash chain and reports the first broken link, if
any; it also checks the chain against the heads the api signed and
published to the stream (AUDIT), and that record itself, so that a chain
rewritten in the database with its hashes recomputed, a forged or missing
head, or a deleted or recreated stream does not pass. With the api's public
key in the client config's context (auditKey, which purser up writes) or in
$PURSER_AUDIT_KEY, it also checks the newest head's signature itself. It
exits non-zero whenever the verification fails.`,
		Example: `  purser history -n team-a --name nightly-report
  purser history --limit 20
  purser history --actor alice --since 2026-11-01T00:00:00Z --oldest-first
  purser history --verify`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := printer.ParseFormat(output, printer.OutputYAML, printer.OutputJSON, printer.OutputJSONPath)
			if err != nil {
				return err
			}
			q := url.Values{}
			for k, v := range map[string]string{"namespace": namespace, "name": name, "actor": actor, "action": action, "since": since, "until": until} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if kind != "" {
				r, err := client.ParseResource(kind)
				if err != nil {
					return err
				}
				q.Set("kind", r.Kind)
			}
			if !oldestFirst {
				q.Set("order", "newest")
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			w := tf.out(cmd, format.Table() && !verify)
			if verify {
				return named(c, verifyHistory(cmd.Context(), c, w))
			}
			items, err := c.List(cmd.Context(), "/api/v1/history", q, limit)
			if err != nil {
				return named(c, err)
			}
			if format.Table() {
				return printer.History(w, items)
			}
			return format.Print(w, []printer.Group{{Items: items}}, false, printer.TableOptions{})
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "only this namespace (default: every namespace you may read)")
	cmd.Flags().StringVar(&kind, "kind", "", "only this kind: runnables, deployables or clusters")
	cmd.Flags().StringVar(&name, "name", "", "only objects of this name")
	cmd.Flags().StringVar(&actor, "actor", "", "only changes by this user")
	cmd.Flags().StringVar(&action, "action", "", "only this action: create, update, delete, cancel, approve, reject, ...")
	cmd.Flags().StringVar(&since, "since", "", "only entries at or after this RFC 3339 time")
	cmd.Flags().StringVar(&until, "until", "", "only entries before this RFC 3339 time")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: yaml, json or jsonpath=TEMPLATE")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many entries: the newest (the oldest with --oldest-first)")
	cmd.Flags().BoolVar(&oldestFirst, "oldest-first", false, "oldest entries first, in the order they were written")
	cmd.Flags().BoolVar(&verify, "verify", false, "check the hash chain instead of listing")
	tf.register(cmd)
	cf.register(cmd)
	cmd.AddCommand(newRestartAnchorsCommand())
	return cmd
}
