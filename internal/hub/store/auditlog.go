package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/purser-io/purser/internal/hub/audit"
)

// AuditFilter selects audit entries for AuditLog.List; empty fields match
// everything.
type AuditFilter struct {
	Namespace string
	Kind      string
	Name      string
	Actor     string
	Action    string
	Since     time.Time // inclusive
	Until     time.Time // exclusive
	AfterSeq  int64     // only entries with a greater Seq: the cursor for the next page
	Limit     int       // <= 0: 500; capped at 1000
	// Newest lists newest first, so that a page of N is the N latest
	// entries; BeforeSeq (only entries with a smaller Seq) is then the
	// cursor for the next page.
	Newest    bool
	BeforeSeq int64
}

// VerifyResult is the outcome of VerifyAudit.
type VerifyResult struct {
	Entries   int64 // entries that verified before the first break (all of them when OK)
	OK        bool
	BrokenSeq int64
	Reason    string
	Anchors   int // anchors the chain was checked against
	// MACsChecked: every entry's MAC was checked (SetAuditMAC); Unsigned
	// entries, from before entries carried MACs, came first.
	MACsChecked bool
	Unsigned    int64
}

// verifyBatch is how many entries VerifyAudit reads per transaction: big
// enough to be fast, small enough that no transaction holds a snapshot
// (or, on SQLite, blocks WAL checkpoints) for long.
const verifyBatch = 1000

// AuditLog is the hash-chained audit log as one transaction appends to and
// reads it.
type AuditLog struct{ tx *Tx }

// Audit returns the audit log as tx sees it.
func (tx *Tx) Audit() AuditLog { return AuditLog{tx} }

// Append appends e to the audit chain, in the same transaction as the
// change it records. It sets e.Seq to the next number (1, 2, 3, ... with no
// gaps, since a rolled-back transaction also rolls back its number),
// e.PrevHash to the previous entry's Hash, e.Time to now if zero (always
// normalised to UTC microseconds) and e.Hash.
//
// Appends are serialized through the single audit_head row: its UPDATE
// takes a row lock that PostgreSQL and CockroachDB hold until commit (SQLite
// has one writer anyway), so concurrent transactions form one linear chain.
// That lock is held to the end of the transaction, so append late in fn.
//
// In a transaction of a GroupCommit, the entry is appended with the
// group's others at the group's end, just before its commit: Seq, PrevHash
// and Hash are set then.
func (al AuditLog) Append(ctx context.Context, e *audit.Entry) error {
	if e.Time.IsZero() {
		e.Time = al.tx.s.now()
	}
	if al.tx.auditBuf != nil {
		*al.tx.auditBuf = append(*al.tx.auditBuf, e)
		return nil
	}
	return al.tx.appendAudit(ctx, []*audit.Entry{e})
}

// AppendMany appends entries in order as Append does, in three
// statements for each few hundred of them rather than for each.
func (al AuditLog) AppendMany(ctx context.Context, entries []*audit.Entry) error {
	now := al.tx.s.now()
	for _, e := range entries {
		if e.Time.IsZero() {
			e.Time = now
		}
	}
	if al.tx.auditBuf != nil {
		*al.tx.auditBuf = append(*al.tx.auditBuf, entries...)
		return nil
	}
	for part := range slices.Chunk(entries, bulkRows) {
		if err := al.tx.appendAudit(ctx, part); err != nil {
			return err
		}
	}
	return nil
}

// appendAudit appends entries to the chain, in order, in three
// statements whatever their number: the head's lock and numbers, the
// rows, the head's hash.
func (tx *Tx) appendAudit(ctx context.Context, entries []*audit.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	// Bumping last_seq first both takes the lock and allocates the numbers
	// in one round trip; RETURNING hands back the new last seq together
	// with the previous entry's hash, which this statement does not change.
	n := int64(len(entries))
	var last int64
	var prevHash string
	if err := tx.queryRow(ctx, `UPDATE audit_head SET last_seq = last_seq + ? WHERE id = 1
		RETURNING last_seq, last_hash`, n).Scan(&last, &prevHash); err != nil {
		return fmt.Errorf("append audit: lock head: %w", classify(err))
	}
	var q strings.Builder
	q.WriteString(`INSERT INTO audit_log (seq, logged_at, actor, action, kind, namespace, name,
			summary, outcome, details, prev_hash, hash, mac) VALUES `)
	args := make([]any, 0, 13*len(entries))
	mac := tx.s.mac.Load()
	for i, e := range entries {
		e.Time = audit.CanonicalTime(e.Time)
		e.Seq, e.PrevHash = last-n+int64(i)+1, prevHash
		e.Hash = audit.ComputeHash(*e)
		e.MAC = ""
		if mac != nil {
			e.MAC = mac.Sum(e.Hash)
		}
		prevHash = e.Hash
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, e.Seq, tx.s.d.ts(e.Time), e.Actor, e.Action, e.Kind, e.Namespace, e.Name, e.Summary, e.Outcome,
			nullText(e.Details), e.PrevHash, e.Hash, nullString(e.MAC))
	}
	if _, err := tx.bulkExec(ctx, len(entries), q.String(), args...); err != nil {
		return fmt.Errorf("append audit seq %d..%d: %w", entries[0].Seq, last, classify(err))
	}
	if _, err := tx.exec(ctx, `UPDATE audit_head SET last_hash = ? WHERE id = 1`, prevHash); err != nil {
		return fmt.Errorf("append audit seq %d: update head: %w", last, classify(err))
	}
	tx.audited = true
	return nil
}

const auditColumns = `seq, logged_at, actor, action, kind, namespace, name, summary, outcome, details, prev_hash, hash, mac`

func (tx *Tx) queryAudit(ctx context.Context, q string, args ...any) ([]*audit.Entry, error) {
	rows, err := tx.query(ctx, q, args...)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	var out []*audit.Entry
	for rows.Next() {
		e := &audit.Entry{}
		var details, mac []byte
		if err := rows.Scan(&e.Seq, timeCol{&e.Time}, &e.Actor, &e.Action, &e.Kind, &e.Namespace, &e.Name,
			&e.Summary, &e.Outcome, &details, &e.PrevHash, &e.Hash, &mac); err != nil {
			return nil, classify(err)
		}
		e.Details, e.MAC = details, string(mac)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// List returns entries matching f, oldest first. To page, pass the
// last returned Seq as the next call's AfterSeq.
func (al AuditLog) List(ctx context.Context, f AuditFilter) ([]*audit.Entry, error) {
	conds := []string{"seq > ?"}
	args := []any{f.AfterSeq}
	order := "seq"
	if f.Newest {
		order = "seq DESC"
		if f.BeforeSeq > 0 {
			conds, args = append(conds, "seq < ?"), append(args, f.BeforeSeq)
		}
	}
	for _, c := range []struct{ column, value string }{
		{"namespace", f.Namespace}, {"kind", f.Kind}, {"name", f.Name}, {"actor", f.Actor}, {"action", f.Action},
	} {
		if c.value != "" {
			conds, args = append(conds, c.column+" = ?"), append(args, c.value)
		}
	}
	if !f.Since.IsZero() {
		conds, args = append(conds, "logged_at >= ?"), append(args, al.tx.s.d.ts(f.Since))
	}
	if !f.Until.IsZero() {
		conds, args = append(conds, "logged_at < ?"), append(args, al.tx.s.d.ts(f.Until))
	}
	q := `SELECT ` + auditColumns + ` FROM audit_log WHERE ` + strings.Join(conds, " AND ") + ` ORDER BY ` + order + ` LIMIT ?`
	out, err := al.tx.queryAudit(ctx, q, append(args, pageLimit(f.Limit))...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	return out, nil
}

// VerifyAudit walks the whole audit chain in batches and reports the first
// entry that does not verify (see audit.Verifier for the reasons). It checks
// the chain up to the head recorded when it starts; entries appended
// meanwhile are left for the next run. Beyond the links themselves it
// checks that the chain reaches the head, which catches entries cut off the
// end. A broken chain is a result, not an error; errors are for failing to
// read it.
//
// Someone able to rewrite both the log and audit_head can forge a consistent
// chain; VerifyAuditAnchored also checks it against heads recorded outside
// the database.
func (s *Store) VerifyAudit(ctx context.Context) (VerifyResult, error) {
	return s.VerifyAuditAnchored(ctx, nil)
}

// VerifyAuditAnchored is VerifyAudit that also checks the chain against
// anchors, the heads published outside the database (read them before
// calling, so that every honest anchor is at or below the head read
// here): an entry whose hash differs from its anchor's was rewritten, and
// an anchored seq beyond the end of the chain means entries were removed
// (or the database was restored from a backup older than the anchor).
func (s *Store) VerifyAuditAnchored(ctx context.Context, anchors []audit.Anchor) (VerifyResult, error) {
	bySeq := make(map[int64]audit.Anchor, len(anchors))
	var newest audit.Anchor
	for _, a := range anchors {
		bySeq[a.Seq] = a
		if a.Seq > newest.Seq {
			newest = a
		}
	}
	var headSeq int64
	var headHash string
	if err := s.Read(ctx, func(tx *Tx) error {
		return classify(tx.queryRow(ctx, `SELECT last_seq, last_hash FROM audit_head WHERE id = 1`).Scan(&headSeq, &headHash))
	}); err != nil {
		return VerifyResult{}, fmt.Errorf("verify audit: read head: %w", err)
	}

	v := audit.NewVerifier(0, audit.GenesisHash)
	w := audit.NewWitness(s.mac.Load())
	for _, a := range anchors {
		if a.MACsFrom > 0 {
			w.RequireFrom(a.MACsFrom)
			break
		}
	}
	after := int64(0)
	for after < headSeq {
		var batch []*audit.Entry
		if err := s.Read(ctx, func(tx *Tx) error {
			var err error
			batch, err = tx.queryAudit(ctx, `SELECT `+auditColumns+` FROM audit_log
				WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?`, after, headSeq, verifyBatch)
			return err
		}); err != nil {
			return VerifyResult{}, fmt.Errorf("verify audit after seq %d: %w", after, err)
		}
		if len(batch) == 0 {
			break
		}
		for _, e := range batch {
			if err := v.Add(*e); err != nil {
				var ce *audit.ChainError
				if !errors.As(err, &ce) {
					return VerifyResult{}, fmt.Errorf("verify audit: %w", err)
				}
				return VerifyResult{Entries: v.Count(), BrokenSeq: ce.Seq, Reason: ce.Reason, Anchors: len(anchors)}, nil
			}
			if err := w.Add(*e); err != nil {
				var ce *audit.ChainError
				errors.As(err, &ce)
				return VerifyResult{Entries: v.Count() - 1, BrokenSeq: ce.Seq, Reason: ce.Reason, Anchors: len(anchors)}, nil
			}
			if a, ok := bySeq[e.Seq]; ok && a.Hash != e.Hash {
				return VerifyResult{Entries: v.Count() - 1, BrokenSeq: e.Seq, Anchors: len(anchors),
					Reason: fmt.Sprintf("rewritten: the hash differs from the anchor published at %s", a.PublishedAt.UTC().Format(time.RFC3339))}, nil
			}
		}
		after = batch[len(batch)-1].Seq
	}

	lastSeq, lastHash := v.Last()
	switch {
	case lastSeq != headSeq:
		return VerifyResult{Entries: v.Count(), BrokenSeq: lastSeq + 1, Anchors: len(anchors),
			Reason: fmt.Sprintf("missing: the log ends at seq %d but the head records seq %d", lastSeq, headSeq)}, nil
	case lastHash != headHash:
		return VerifyResult{Entries: v.Count(), BrokenSeq: lastSeq, Anchors: len(anchors),
			Reason: "hash does not match the head"}, nil
	case newest.Seq > lastSeq:
		return VerifyResult{Entries: v.Count(), BrokenSeq: lastSeq + 1, Anchors: len(anchors),
			Reason: fmt.Sprintf("missing: seq %d was anchored at %s, but the log ends at seq %d (entries removed, or the database restored from an older backup)",
				newest.Seq, newest.PublishedAt.UTC().Format(time.RFC3339), lastSeq)}, nil
	}
	return VerifyResult{Entries: v.Count(), OK: true, Anchors: len(anchors), Unsigned: w.Unsigned(), MACsChecked: s.mac.Load() != nil}, nil
}

// Head returns the seq and hash of the newest audit entry (0 and the
// genesis hash for an empty log).
func (al AuditLog) Head(ctx context.Context) (int64, string, error) {
	var seq int64
	var hash string
	if err := al.tx.queryRow(ctx, `SELECT last_seq, last_hash FROM audit_head WHERE id = 1`).Scan(&seq, &hash); err != nil {
		return 0, "", fmt.Errorf("audit head: %w", classify(err))
	}
	return seq, hash, nil
}

// Hash returns the hash of entry seq, or ErrNotFound.
func (al AuditLog) Hash(ctx context.Context, seq int64) (string, error) {
	var hash string
	if err := al.tx.queryRow(ctx, `SELECT hash FROM audit_log WHERE seq = ?`, seq).Scan(&hash); err != nil {
		return "", fmt.Errorf("audit entry %d: %w", seq, classify(err))
	}
	return hash, nil
}

// DurableAuditHead returns the audit chain's head once it is as durable
// as an acknowledged commit, for the anchor publisher to vouch for: it
// reads the head on the primary and, in the same transaction, writes its
// own row of write_checks (name), so that the commit returns only once the
// database made it, and so everything the read saw, durable. On
// PostgreSQL with synchronous replication that is once the synchronous
// standby holds it: a commit that is only the primary's (its wait for
// the standby cancelled) can vanish in a failover, and an anchor of it
// would then accuse the chain of a rewrite. A context that ended during
// the commit fails it, as the wait may have been cut short.
func (s *Store) DurableAuditHead(ctx context.Context, name string) (int64, string, error) {
	var seq int64
	var hash string
	err := s.Tx(ctx, func(tx *Tx) (err error) {
		if seq, hash, err = tx.Audit().Head(ctx); err != nil {
			return err
		}
		return tx.writeCheck(ctx, name)
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return 0, "", fmt.Errorf("audit head, made durable: %w", err)
	}
	return seq, hash, nil
}

// CheckAuditAppended checks the entries appended after seq after (whose
// hash was afterHash when it was anchored) up to seq upto, as the anchor
// publisher must before it vouches for them: each links to the one
// before, was written by one of purser's writers (its MAC, once entries
// carry MACs: from macsFrom on, as the last anchor recorded, or from the
// first that carries one) and is not dated back in time. It returns
// where MACs begin as far as upto (macsFrom, or the first entry checked
// that carries one; 0 if none), or the *audit.ChainError of the first
// entry that does not check. It reads the primary (ReadPrimary).
func (s *Store) CheckAuditAppended(ctx context.Context, after int64, afterHash string, upto, macsFrom int64) (int64, error) {
	v := audit.NewVerifier(after, afterHash)
	w := audit.NewWitness(s.mac.Load())
	w.RequireFrom(macsFrom)
	if after > 0 {
		var prev []*audit.Entry
		if err := s.ReadPrimary(ctx, func(tx *Tx) (err error) {
			prev, err = tx.queryAudit(ctx, `SELECT `+auditColumns+` FROM audit_log WHERE seq = ?`, after)
			return err
		}); err != nil {
			return 0, fmt.Errorf("check audit entries after %d: %w", after, err)
		}
		if len(prev) == 1 {
			// Its own link and MAC were checked when it was anchored; it
			// sets where the dates and the MACs stand.
			w.Begin(*prev[0])
		}
	}
	for after < upto {
		var batch []*audit.Entry
		if err := s.ReadPrimary(ctx, func(tx *Tx) (err error) {
			batch, err = tx.queryAudit(ctx, `SELECT `+auditColumns+` FROM audit_log
				WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?`, after, upto, verifyBatch)
			return err
		}); err != nil {
			return 0, fmt.Errorf("check audit entries after %d: %w", after, err)
		}
		if len(batch) == 0 {
			return 0, &audit.ChainError{Seq: after + 1, Reason: fmt.Sprintf("missing: the head records seq %d", upto)}
		}
		for _, e := range batch {
			if err := v.Add(*e); err != nil {
				return 0, err
			}
			if err := w.Add(*e); err != nil {
				return 0, err
			}
		}
		after = batch[len(batch)-1].Seq
	}
	if macsFrom > 0 {
		return macsFrom, nil
	}
	return w.MACsFrom(), nil
}
