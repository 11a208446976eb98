package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
)

// HistoryEntry is one audit entry as the API shows it.
type HistoryEntry struct {
	Seq      int64           `json:"seq"`
	Time     time.Time       `json:"time"`
	Actor    string          `json:"actor"`
	Action   string          `json:"action"`
	Object   string          `json:"object"`
	Summary  string          `json:"summary"`
	Outcome  string          `json:"outcome"`
	Details  json.RawMessage `json:"details,omitempty"`
	Hash     string          `json:"hash"`
	PrevHash string          `json:"prevHash"`
}

// objectRef names an object in history: kind/namespace/name, or kind/name
// for objects without a namespace.
func objectRef(kind, namespace, name string) string {
	if namespace == "" {
		return kind + "/" + name
	}
	return kind + "/" + namespace + "/" + name
}

func historyEntry(e *audit.Entry) HistoryEntry {
	return HistoryEntry{
		Seq: e.Seq, Time: e.Time, Actor: e.Actor, Action: e.Action,
		Object:  objectRef(e.Kind, e.Namespace, e.Name),
		Summary: e.Summary, Outcome: e.Outcome, Details: e.Details,
		Hash: e.Hash, PrevHash: e.PrevHash,
	}
}

// listHistory serves GET /api/v1/history, oldest first, or newest first
// with ?order=newest (so that ?limit=N is the N latest). Reading one
// namespace's history needs the viewer role there; the whole history
// (clusters included) needs read access everywhere.
func (s *Server) listHistory(r *http.Request, u policy.User) (int, any, error) {
	q := r.URL.Query()
	f := store.AuditFilter{
		Namespace: q.Get("namespace"), Kind: q.Get("kind"), Name: q.Get("name"),
		Actor: q.Get("actor"), Action: q.Get("action"),
	}
	if f.Namespace == "" && !s.policy().ReadsEverywhere(u) {
		return 0, nil, errForbidden("user %q may not read the history of every namespace; pass ?namespace=", u.Name)
	}
	if f.Namespace != "" && !s.policy().Allowed(u, f.Namespace, policy.VerbRead) {
		return 0, nil, errForbidden("user %q may not read namespace %q", u.Name, f.Namespace)
	}
	var err error
	if f.Since, err = parseTimeParam(q.Get("since"), "since"); err != nil {
		return 0, nil, err
	}
	if f.Until, err = parseTimeParam(q.Get("until"), "until"); err != nil {
		return 0, nil, err
	}
	if f.Limit, err = parseLimit(q.Get("limit")); err != nil {
		return 0, nil, err
	}
	switch q.Get("order") {
	case "", "oldest":
	case "newest":
		f.Newest = true
	default:
		return 0, nil, errBadRequest("order must be oldest (the default) or newest, got %q", q.Get("order"))
	}
	if c := q.Get("continue"); c != "" {
		seq, err := strconv.ParseInt(c, 10, 64)
		if err != nil || seq < 0 {
			return 0, nil, errBadRequest("the continue token is not valid; start the list again")
		}
		if f.Newest {
			f.BeforeSeq = seq
		} else {
			f.AfterSeq = seq
		}
	}
	var entries []*audit.Entry
	if err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		entries, err = tx.Audit().List(r.Context(), f)
		return err
	}); err != nil {
		return 0, nil, err
	}
	out := List[HistoryEntry]{Items: make([]HistoryEntry, 0, len(entries))}
	for _, e := range entries {
		out.Items = append(out.Items, historyEntry(e))
	}
	if f.Limit > 0 && len(entries) == f.Limit {
		out.Continue = strconv.FormatInt(entries[len(entries)-1].Seq, 10)
	}
	return http.StatusOK, out, nil
}

// List is the shape of every list response.
type List[T any] struct {
	Items    []T    `json:"items"`
	Continue string `json:"continue,omitempty"`
}

func parseTimeParam(v, name string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, errBadRequest("%s must be an RFC 3339 time such as 2026-12-01T06:00:00Z, got %q", name, v)
	}
	return t, nil
}

// parseLimit reads ?limit=; the store applies its own default and maximum.
func parseLimit(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, errBadRequest("limit must be a positive integer, got %q", v)
	}
	return n, nil
}
