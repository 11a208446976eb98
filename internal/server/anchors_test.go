package server_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"github.com/purser-io/purser/internal/anchor"
	"github.com/purser-io/purser/internal/store"
	"github.com/purser-io/purser/internal/stream"
)

// startAnchors runs the api's publisher of the chain's heads, as purser
// api does: declared and anchored before the first request, woken by every
// commit that appends to the chain.
func startAnchors(t testing.TB, db *store.Store, streams *stream.Client) *anchor.Publisher {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p, err := anchor.New(anchor.Config{Store: db, Stream: streams, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	db.OnAuditCommit(p.Notify)
	if err := p.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}
