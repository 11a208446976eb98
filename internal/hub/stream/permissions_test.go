package stream_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/platform/localport"
)

// The users that docs/operations.md tells production to give NATS
// (deploy/nats/purser-permissions.conf), in a real nats-server: the api
// declares the AUDIT stream and publishes anchors; the other components
// declare their streams and work, but cannot publish an anchor; and nobody
// can delete, purge or update the AUDIT stream, nor delete a message.
func TestProductionPermissions(t *testing.T) {
	conf, err := os.ReadFile("../../../deploy/nats/purser-permissions.conf")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PURSER_API_NATS_PASSWORD", "api-secret")
	t.Setenv("PURSER_NATS_PASSWORD", "component-secret")
	port, err := localport.Free()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// NATS includes files relative to the including one.
	if err := os.WriteFile(filepath.Join(dir, "purser-permissions.conf"), conf, 0o600); err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(main, []byte(fmt.Sprintf("host: 127.0.0.1\nport: %d\njetstream { store_dir: %q }\ninclude \"purser-permissions.conf\"\n", port, dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(main)
	if err != nil {
		t.Fatalf("the documented configuration: %v", err)
	}
	opts.NoSigs = true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(streamtest.Timeout) {
		t.Fatal("nats-server not ready")
	}
	url := func(user, password string) string {
		return fmt.Sprintf("nats://%s:%s@127.0.0.1:%d", user, password, port)
	}
	ctx := streamtest.Context(t)

	api := streamtest.Connect(t, url("purser-api", "api-secret"))
	if err := api.Declare(ctx); err != nil {
		t.Fatalf("the api declares the streams: %v", err)
	}
	if err := api.DeclareAudit(ctx); err != nil {
		t.Fatalf("the api declares AUDIT: %v", err)
	}
	if _, err := api.PublishAfter(ctx, stream.SubjectAuditAnchors, "a1", []byte("anchor"), 0); err != nil {
		t.Fatalf("the api publishes an anchor: %v", err)
	}
	component := streamtest.Connect(t, url("purser", "component-secret"))
	if err := component.Declare(ctx); err != nil {
		t.Fatalf("a component declares its streams: %v", err)
	}
	if err := component.Publish(ctx, stream.SubjectSubmissions, "s1", []byte("{}")); err != nil {
		t.Fatalf("a component publishes a submission: %v", err)
	}
	if _, err := component.JetStream().Stream(ctx, stream.AuditStream); err != nil {
		t.Fatalf("a component reads AUDIT (verification does): %v", err)
	}

	// Each refusal is the server's permissions violation, reported to the
	// connection that tried: a signal to wait for, not a timeout.
	for _, c := range []struct{ user, password, subject string }{
		{"purser", "component-secret", stream.SubjectAuditAnchors},
		{"purser", "component-secret", "$JS.API.STREAM.CREATE." + stream.AuditStream},
		{"purser", "component-secret", "$JS.API.STREAM.DELETE." + stream.AuditStream},
		{"purser-api", "api-secret", "$JS.API.STREAM.DELETE." + stream.AuditStream},
		{"purser-api", "api-secret", "$JS.API.STREAM.PURGE." + stream.AuditStream},
		{"purser-api", "api-secret", "$JS.API.STREAM.UPDATE." + stream.AuditStream},
		{"purser-api", "api-secret", "$JS.API.STREAM.MSG.DELETE." + stream.AuditStream},
		{"purser", "component-secret", "$JS.API.STREAM.MSG.DELETE." + stream.AuditStream},
	} {
		refused := make(chan error, 1)
		nc, err := nats.Connect(url(c.user, c.password), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case refused <- err:
			default:
			}
		}))
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Publish(c.subject, []byte(`{"seq":1}`)); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-refused:
			if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				t.Errorf("%s publishing to %s: %v, want a permissions violation", c.user, c.subject, err)
			}
		case <-time.After(streamtest.Timeout):
			t.Errorf("%s may publish to %s", c.user, c.subject)
		}
		nc.Close()
	}
	s, err := api.JetStream().Stream(context.Background(), stream.AuditStream)
	if err != nil {
		t.Fatalf("AUDIT after the attempts: %v", err)
	}
	if st := s.CachedInfo().State; st.Msgs != 1 || st.FirstSeq != 1 {
		t.Fatalf("AUDIT after the attempts holds %d messages from %d, want the api's one", st.Msgs, st.FirstSeq)
	}
}
