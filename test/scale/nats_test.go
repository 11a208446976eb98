package scale_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// startNATS starts the nats-server purser embeds (the version of its
// go.mod), with JetStream on local disk, as a farm's NATS is deployed:
// nats-server's own default of syncing its files every two minutes, its
// durability coming from the stream's replicas, not from a sync per
// message. The embedded server of `purser up` (stream.StartEmbedded)
// syncs every message (SyncAlways), for a single process whose stream has
// no other copy; on this machine's disk that caps a stream at about a
// thousand messages a second (docs/benchmarks.md), which would make the
// million objects of this benchmark a quarter of an hour of publishing
// and measure the disk, not purser.
func startNATS(t testing.TB) string {
	t.Helper()
	srv, err := server.NewServer(&server.Options{
		ServerName: "purser-scale",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   t.TempDir(),
		NoSigs:     true,
		// A whole farm's backlog stays in the stream until ingested.
		JetStreamMaxStore: 64 << 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats-server did not start within 30 s")
	}
	return srv.ClientURL()
}
