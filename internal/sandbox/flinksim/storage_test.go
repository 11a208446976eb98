package flinksim_test

import (
	"context"
	"errors"
	"testing"

	"github.com/purser-io/purser/internal/flink/checkpoints"
	"github.com/purser-io/purser/internal/sandbox/flinksim"
)

// What the simulators write to a Storage is what purser's failover reads:
// the newest checkpoint with its _metadata, found over the S3 API; and it
// is still there after the store is started again on the same folder, as
// purser up does on a restart.
func TestStorageKeepsCheckpointsAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const job = "0123456789abcdef0123456789abcdef"
	s, err := flinksim.StartStorage(ctx, dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"s3://checkpoints/clickstream/" + job + "/chk-1", "s3://checkpoints/clickstream/" + job + "/chk-2",
		"s3a://savepoints/clickstream/savepoint-0123-abcdef"} {
		if err := s.WriteMetadata(ctx, p); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
	}
	if err := s.WriteMetadata(ctx, "file:///tmp/x"); err == nil {
		t.Fatal("a checkpoint outside S3 was accepted")
	}
	latest := func(s *flinksim.Storage) checkpoints.Checkpoint {
		t.Helper()
		r, err := checkpoints.New(checkpoints.Config{Endpoint: s.Endpoint(), AccessKeyID: flinksim.StorageAccessKey,
			SecretAccessKey: flinksim.StorageSecretKey, Insecure: true})
		if err != nil {
			t.Fatal(err)
		}
		c, err := r.Latest(ctx, "s3://checkpoints/clickstream", job)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := latest(s); c.Path != "s3://checkpoints/clickstream/"+job+"/chk-2" || c.ID != 2 {
		t.Fatalf("newest checkpoint %+v, want chk-2", c)
	}
	s.Close()

	s, err = flinksim.StartStorage(ctx, dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c := latest(s); c.ID != 2 {
		t.Fatalf("after a restart the newest checkpoint is %+v, want chk-2", c)
	}
	keys, err := s.Objects(ctx, "savepoints", "clickstream/")
	if err != nil || len(keys) != 1 || keys[0] != "clickstream/savepoint-0123-abcdef/_metadata" {
		t.Fatalf("savepoints after a restart: %v, %v", keys, err)
	}
	r, _ := checkpoints.New(checkpoints.Config{Endpoint: s.Endpoint(), Insecure: true})
	if _, err := r.Latest(ctx, "s3://checkpoints/other", job); !errors.Is(err, checkpoints.ErrNone) {
		t.Fatalf("a job without checkpoints: %v, want ErrNone", err)
	}
}
