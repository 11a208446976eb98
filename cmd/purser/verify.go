package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/hub/audit"
)

// verifyHistory asks the server to verify the audit chain and its record
// of anchors and, with a key of the client's own, checks the newest
// anchor's signature too: a server whose signing key was replaced still
// signs what it publishes, but not with the key the client was given.
func verifyHistory(ctx context.Context, c *client.Client, w io.Writer) error {
	var res struct {
		Entries   int64  `json:"entries"`
		OK        bool   `json:"ok"`
		BrokenSeq int64  `json:"brokenSeq"`
		Reason    string `json:"reason"`
		Anchors   int    `json:"anchors"`
		Record    *struct {
			OK      bool            `json:"ok"`
			Problem string          `json:"problem"`
			Key     string          `json:"key"`
			Newest  json.RawMessage `json:"newest"`
			Since   *struct {
				Seq    int64  `json:"seq"`
				Actor  string `json:"actor"`
				Reason string `json:"reason"`
			} `json:"since"`
		} `json:"record"`
	}
	if _, err := c.Do(ctx, http.MethodGet, "/api/v1/history/verify", nil, nil, "", &res); err != nil {
		return err
	}
	if !res.OK {
		if res.BrokenSeq > 0 {
			return fmt.Errorf("audit chain broken at entry %d: %s", res.BrokenSeq, res.Reason)
		}
		return fmt.Errorf("audit chain not verified: %s", res.Reason)
	}
	if res.Record == nil {
		return fmt.Errorf("audit chain: %d entries link up, but the server keeps no record of anchors, so a rewrite of the whole chain would not show", res.Entries)
	}
	if key := c.Config().AuditKey; key != "" {
		if res.Record.Key != key {
			return fmt.Errorf("the server checks its anchors with key %s, but this client trusts %s: the signing key was replaced", res.Record.Key, key)
		}
		pub, err := audit.ParsePublicKey(key)
		if err != nil {
			return fmt.Errorf("client config auditKey: %w", err)
		}
		if len(res.Record.Newest) > 0 {
			if _, err := audit.OpenAnchor(res.Record.Newest, audit.NewKeys(pub)); err != nil {
				return fmt.Errorf("the newest anchor does not verify with %s: %w", key, err)
			}
		}
	}
	fmt.Fprintf(w, "audit chain intact: %d entries verified, against %d anchors signed by %s\n", res.Entries, res.Anchors, res.Record.Key)
	if s := res.Record.Since; s != nil {
		fmt.Fprintf(w, "the record of anchors was begun again at entry %d by %s: %s\n", s.Seq, s.Actor, s.Reason)
	}
	if c.Config().AuditKey == "" {
		fmt.Fprintln(w, "no auditKey in the client config: the server's own key was trusted")
	}
	return nil
}

func newRestartAnchorsCommand() *cobra.Command {
	var cf clientFlags
	var reason string
	cmd := &cobra.Command{
		Use:   "restart-anchors",
		Short: "Begin a new record of audit anchors, once the old one is gone (admins only)",
		Long: `After a restore of the database, or once the AUDIT stream was lost, the api
anchors nothing (verification fails: the stream holds no anchor for the
chain's entries). Once the incident is recorded where your organisation
records them, an admin removes the old stream if there is one (nats stream
rm AUDIT) and begins a new record here: the reason is appended to the chain,
and the new record's first anchor names who began it. Verification passes
again and says from which entry the record runs.`,
		Example: `  purser history restart-anchors --reason "database restored to 06:00 after INC-1234"`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(reason) == "" {
				return errors.New("--reason is required: it is kept in the audit chain")
			}
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			body, _ := json.Marshal(map[string]string{"reason": reason})
			if _, err := c.Do(cmd.Context(), http.MethodPost, "/api/v1/history/anchors/restart", nil, body, "application/json", nil); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "a new record of anchors begins with the chain as it is")
			return verifyHistory(cmd.Context(), c, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why the record is begun again (kept in the audit chain)")
	cf.register(cmd)
	return cmd
}
