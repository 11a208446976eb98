package compose

import (
	"context"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// TestHubStartsWithoutTheStream: a process started while the stream is
// out (every NATS server down, with a fresh store) starts after
// streamStartWait rather than wait for it, and declares the stream's
// topology once the stream is back.
func TestHubStartsWithoutTheStream(t *testing.T) {
	nats := streamtest.Start(t, "")
	nats.Stop()
	start := time.Now()
	h, err := OpenHub(t.Context(), HubConfig{Name: "api", NATS: nats.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// The connection's wait, then the topology's.
	if took := time.Since(start); took < 2*streamStartWait || took > 2*streamStartWait+20*time.Second {
		t.Fatalf("started after %s with the stream out, want about %s", took, 2*streamStartWait)
	}
	nats.Restart()
	c := streamtest.Connect(t, nats.URL)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := reconcile.Poll(ctx, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		_, err := c.JetStream().Stream(ctx, stream.SubmissionsStream)
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the topology was not declared once the stream was back: %v", err)
	}
}
