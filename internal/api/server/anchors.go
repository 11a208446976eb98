package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/anchor"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// AnchorRecord is the record of the audit chain's heads kept outside the
// database (*anchor.Publisher).
type AnchorRecord interface {
	// Record reads and checks the record, for a chain of chainSeq entries.
	Record(ctx context.Context, chainSeq int64) (anchor.Record, error)
	// CanRestart says why a new record cannot begin, or nil.
	CanRestart(ctx context.Context) error
	// Restart begins a new record over the chain as it is.
	Restart(ctx context.Context, actor, reason string) error
	// KeyString is the public key that verifies the anchors.
	KeyString() string
}

// ChainStatus is the answer of GET /api/v1/history/verify: how many
// entries were checked and, when the chain is broken, the first bad entry;
// how many of the heads published outside the database it was checked
// against, and what the record of those heads holds. OK is true only when
// both the chain and the record check.
type ChainStatus struct {
	Entries   int64         `json:"entries"`
	OK        bool          `json:"ok"`
	BrokenSeq int64         `json:"brokenSeq,omitempty"`
	Reason    string        `json:"reason,omitempty"`
	Anchors   int           `json:"anchors"`
	Record    *RecordStatus `json:"record,omitempty"`
	// MACsChecked says every entry's MAC was checked against the key of
	// purser's writers; Unsigned counts the entries before the first with
	// a MAC (written by a purser from before they had one).
	MACsChecked bool  `json:"macsChecked"`
	Unsigned    int64 `json:"unsigned,omitempty"`
}

// RecordStatus describes the record of anchors a verification used.
type RecordStatus struct {
	OK bool `json:"ok"`
	// Problem is why the record does not check.
	Problem string `json:"problem,omitempty"`
	// Key is the public key the anchors were checked with.
	Key string `json:"key"`
	// Newest is the newest anchor, signed, so that a client can check it
	// with the key it was given (purser history --verify does).
	Newest json.RawMessage `json:"newest,omitempty"`
	// Since is set when the record was begun again over an existing chain.
	Since *RecordRestart `json:"since,omitempty"`
}

// RecordRestart is the first anchor of a record begun again.
type RecordRestart struct {
	Seq         int64     `json:"seq"`
	Actor       string    `json:"actor"`
	Reason      string    `json:"reason"`
	PublishedAt time.Time `json:"publishedAt"`
}

// verifyHistory walks the hash chain and checks it against the record of
// anchors; anyone who may read all history may check it.
func (s *Server) verifyHistory(r *http.Request, u policy.User) (int, any, error) {
	if !s.policy().ReadsEverywhere(u) {
		return 0, nil, errForbidden("user %q may not read the whole history", u.Name)
	}
	ctx := r.Context()
	// The head first, then the anchors, then the chain: every honest
	// anchor is then at or above the first head and at or below the
	// chain's end that the walk reads.
	var headSeq int64
	if err := s.cfg.Store.Read(ctx, func(tx *store.Tx) (err error) {
		headSeq, _, err = tx.Audit().Head(ctx)
		return err
	}); err != nil {
		return 0, nil, err
	}
	var rec anchor.Record
	var status *RecordStatus
	if s.cfg.Anchors != nil {
		status = &RecordStatus{OK: true, Key: s.cfg.Anchors.KeyString()}
		var err error
		if rec, err = s.cfg.Anchors.Record(ctx, headSeq); err != nil {
			status.OK, status.Problem = false, err.Error()
			var re *audit.RecordError
			if !errors.As(err, &re) {
				status.Problem = "cannot read the record of anchors: " + err.Error()
			}
		}
		status.Newest = rec.Newest
		if len(rec.Anchors) > 0 && rec.Anchors[0].Restart != nil {
			first := rec.Anchors[0]
			status.Since = &RecordRestart{Seq: first.Seq, Actor: first.Restart.Actor, Reason: first.Restart.Reason, PublishedAt: first.PublishedAt}
		}
	}
	res, err := s.cfg.Store.VerifyAuditAnchored(ctx, rec.Anchors)
	if err != nil {
		return 0, nil, err
	}
	out := ChainStatus{Entries: res.Entries, OK: res.OK, BrokenSeq: res.BrokenSeq, Reason: res.Reason, Anchors: res.Anchors, Record: status,
		MACsChecked: res.MACsChecked, Unsigned: res.Unsigned}
	if status != nil && !status.OK {
		out.OK = false
		if out.Reason == "" {
			out.Reason = "the record of anchors does not check: " + status.Problem
		}
	}
	return http.StatusOK, out, nil
}

// RestartRequest is the body of POST /api/v1/history/anchors/restart.
type RestartRequest struct {
	Reason string `json:"reason"`
}

// restartAnchors begins a new record of anchors over the chain as it is,
// once the old record is gone (the stream removed after a restore of the
// database, or lost): only a global admin, with a reason, which is
// appended to the chain before the new record anchors it.
func (s *Server) restartAnchors(r *http.Request, u policy.User) (int, any, error) {
	if !s.policy().IsAdmin(u) {
		return 0, nil, errForbidden("user %q may not restart the record of anchors; only an admin may", u.Name)
	}
	if s.cfg.Anchors == nil {
		return 0, nil, errConflict("this server keeps no record of anchors")
	}
	req, err := decodeBody(r, func(data []byte, _ string) (RestartRequest, error) {
		var req RestartRequest
		if err := yaml.UnmarshalStrict(data, &req); err != nil {
			return req, errBadRequest("request body is malformed: %v", err)
		}
		return req, nil
	})
	if err != nil {
		return 0, nil, err
	}
	if strings.TrimSpace(req.Reason) == "" {
		return 0, nil, errInvalid("a reason is required", nil)
	}
	ctx := r.Context()
	if err := s.cfg.Anchors.CanRestart(ctx); err != nil {
		if errors.Is(err, anchor.ErrRecordExists) {
			return 0, nil, errConflict("%s", err.Error())
		}
		return 0, nil, err
	}
	if err := s.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
		return appendAudit(ctx, tx, u, "restart-anchors", "AuditRecord", "", stream.AuditStream, "record of anchors begun again", "Restarted",
			map[string]string{"reason": req.Reason})
	}); err != nil {
		return 0, nil, err
	}
	if err := s.cfg.Anchors.Restart(ctx, u.Name, req.Reason); err != nil {
		if errors.Is(err, anchor.ErrRecordExists) {
			return 0, nil, errConflict("%s", err.Error())
		}
		return 0, nil, err
	}
	return s.verifyHistory(r, u)
}
