package main

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/seal"
	"github.com/purser-io/purser/internal/store"
)

// A split-out component serves its own metrics: here the controller's
// failover counters and the leader gauge, beside the Go runtime's.
func TestControllerServesMetrics(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "secret.key")
	if err := os.WriteFile(key, []byte(base64.StdEncoding.EncodeToString(make([]byte, 32))), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		cmd := newRootCommand()
		cmd.SetOut(io.Discard)
		cmd.SetArgs([]string{"controller", "--database", filepath.Join(dir, "purser.db"), "--key-file", key, "--metrics-listen", addr})
		done <- cmd.ExecuteContext(ctx)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("purser controller: %v", err)
		}
	}()

	var body string
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			if strings.Contains(body, "purser_leader") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no purser_leader in /metrics after 30s (last error %v):\n%s", err, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{"purser_failover_purged_total", "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}

// A component whose database does not answer at start waits for it,
// alive for its liveness probe, instead of exiting into the kubelet's
// growing restart backoff; stopping it ends the wait.
func TestComponentWaitsForDatabase(t *testing.T) {
	closed := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	db, addr := closed(), closed()
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	if _, err := seal.EnsureKeyFile(keyFile); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		cmd := newRootCommand()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SetArgs([]string{"ingester", "--database", "postgres://purser@" + db + "/purser?sslmode=disable",
			"--nats", "nats://" + closed(), "--metrics-listen", addr, "--key-file", keyFile})
		done <- cmd.ExecuteContext(ctx)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("the ingester exited instead of waiting for its database: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no /healthz while waiting for the database: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("the ingester exited instead of waiting for its database: %v", err)
	case <-time.After(3 * time.Second):
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("stopped while waiting: %v, want the database's unavailability", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the ingester did not stop")
	}
}
