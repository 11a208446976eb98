// Package streamtest gives tests a real NATS JetStream: an embedded server
// in a temporary directory, clients connected to it with purser's streams
// declared, and a way to stop and restart the server on the same directory
// and port, which is how tests inject a stream outage:
//
//	srv := streamtest.Start(t, "")
//	c := streamtest.Declared(t, srv.URL)
//	srv.Stop()    // clients see the outage
//	srv.Restart() // same URL, same data
package streamtest

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/platform/localport"
)

// Timeout bounds every wait on the server. It is generous on purpose: a
// test asserts what happens, never how fast a loaded machine does it.
const Timeout = 30 * time.Second

// Server is an embedded server that can be stopped and started again.
type Server struct {
	t   testing.TB
	Dir string
	URL string

	port     int
	embedded *stream.Embedded
}

// Start starts a server storing its data in dir, or in a new temporary
// directory when dir is empty. It is shut down when the test ends.
func Start(t testing.TB, dir string) *Server {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	s := &Server{t: t, Dir: dir}
	s.start()
	u, err := url.Parse(s.embedded.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	if s.port, err = strconv.Atoi(u.Port()); err != nil {
		t.Fatal(err)
	}
	s.URL = s.embedded.ClientURL()
	t.Cleanup(s.Stop)
	return s
}

// Stop shuts the server down and waits until it has stopped. Stopping a
// stopped server does nothing.
func (s *Server) Stop() {
	if s.embedded != nil {
		s.embedded.Shutdown()
		s.embedded = nil
	}
}

// Restart starts the server again on the same directory and port, so that
// connected clients find it by reconnecting.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

func (s *Server) start() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if s.port != 0 {
		e, err := stream.StartEmbedded(ctx, stream.EmbeddedConfig{Dir: s.Dir, Port: s.port})
		if err != nil {
			s.t.Fatal(err)
		}
		s.embedded = e
		return
	}
	// The first start: a port from localport, so that a restart finds it
	// free; another process may take one between the choice and the
	// listen, so try a few.
	var err error
	for range 10 {
		var port int
		if port, err = localport.Free(); err != nil {
			break
		}
		var e *stream.Embedded
		if e, err = stream.StartEmbedded(ctx, stream.EmbeddedConfig{Dir: s.Dir, Port: port}); err == nil {
			s.embedded = e
			return
		}
	}
	s.t.Fatal(err)
}

// Connect connects to serverURL; the client is closed when the test ends.
func Connect(t testing.TB, serverURL string) *stream.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	c, err := stream.Connect(ctx, serverURL, stream.Config{Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Declared connects to serverURL and declares purser's streams, the
// state every component starts from.
func Declared(t testing.TB, serverURL string) *stream.Client {
	t.Helper()
	c := Connect(t, serverURL)
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := c.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// Context is the test's context bounded by Timeout.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// Consumed reports an error until the durable consumer of streamName has
// been delivered every message and has acknowledged each: a consumer that
// acks after its work is done has then done all it will for what was
// published so far, which is what a test waits for before asserting that
// something did not happen.
func Consumed(ctx context.Context, c *stream.Client, streamName, consumer string) error {
	cons, err := c.JetStream().Consumer(ctx, streamName, consumer)
	if err != nil {
		return err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return err
	}
	if info.NumPending != 0 || info.NumAckPending != 0 {
		return fmt.Errorf("consumer %s of %s: %d pending, %d unacknowledged", consumer, streamName, info.NumPending, info.NumAckPending)
	}
	return nil
}
