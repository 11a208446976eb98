package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ManagedFields is server-side apply's record of field ownership of
// purser's objects written through /k8s, as one transaction reads and
// writes it (migration 00033).
type ManagedFields struct{ tx *Tx }

// ManagedFields returns the records as tx sees them.
func (tx *Tx) ManagedFields() ManagedFields { return ManagedFields{tx} }

// Get returns the record of an object: the identity of the object it was
// written for and its entries (JSON); ErrNotFound when there is none.
func (m ManagedFields) Get(ctx context.Context, kind, namespace, name string) (identity string, entries []byte, err error) {
	var s string
	err = m.tx.queryRow(ctx, `SELECT identity, entries FROM managed_fields WHERE kind = ? AND namespace = ? AND name = ?`,
		kind, namespace, name).Scan(&identity, &s)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, fmt.Errorf("managed fields of %s %s/%s: %w", kind, namespace, name, ErrNotFound)
	}
	if err != nil {
		return "", nil, fmt.Errorf("managed fields of %s %s/%s: %w", kind, namespace, name, classify(err))
	}
	return identity, []byte(s), nil
}

// Put writes the record of an object, replacing any.
func (m ManagedFields) Put(ctx context.Context, kind, namespace, name, identity string, entries []byte) error {
	_, err := m.tx.exec(ctx, `INSERT INTO managed_fields (kind, namespace, name, identity, entries) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (kind, namespace, name) DO UPDATE SET identity = excluded.identity, entries = excluded.entries`,
		kind, namespace, name, identity, string(entries))
	if err != nil {
		return fmt.Errorf("put managed fields of %s %s/%s: %w", kind, namespace, name, classify(err))
	}
	return nil
}
