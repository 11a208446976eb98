package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// A split-out component serves its own metrics: here the controller's
// failover counters and the leader gauge, beside the Go runtime's.
func TestControllerServesMetrics(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "secret.key")
	if err := os.WriteFile(key, []byte(base64.StdEncoding.EncodeToString(make([]byte, 32))), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.1:0")
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
	sandboxtest.Eventually(t, 30*time.Second, "purser_leader in /metrics", func(ctx context.Context) error {
		resp, err := getURL(ctx, "http://"+addr+"/metrics")
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if body = string(b); !strings.Contains(body, "purser_leader") {
			return fmt.Errorf("/metrics:\n%s", body)
		}
		return nil
	})
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
		ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.1:0")
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
	sandboxtest.Eventually(t, 30*time.Second, "/healthz while waiting for the database", func(ctx context.Context) error {
		select {
		case err := <-done:
			t.Fatalf("the ingester exited instead of waiting for its database: %v", err)
		default:
		}
		resp, err := getURL(ctx, "http://"+addr+"/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/healthz: %s", resp.Status)
		}
		return nil
	})
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

// getURL is http.Get bound to ctx.
func getURL(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return nil, err
	}
	return http.DefaultClient.Do(req)
}
