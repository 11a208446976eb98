package main

import (
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
