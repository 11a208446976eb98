package checkpoints_test

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/purser-io/purser/internal/flink/checkpoints"
)

const (
	jobA = "44cc5573a6c1e3c0e7c0b3a4e5f6a7b8"
	jobB = "0f3c0f3c0f3c0f3c0f3c0f3c0f3c0f3c"
)

// server is an S3-compatible server over real HTTP, and a client of it
// that writes what Flink would.
type server struct {
	endpoint string
	client   *minio.Client
}

func startS3(t *testing.T) *server {
	t.Helper()
	ts := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(ts.Close)
	u, _ := url.Parse(ts.URL)
	c, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4("flink", "secret", ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	return &server{endpoint: u.Host, client: c}
}

func (s *server) put(t *testing.T, bucket string, keys ...string) {
	t.Helper()
	ctx := context.Background()
	if ok, _ := s.client.BucketExists(ctx, bucket); !ok {
		if err := s.client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		body := []byte("state of " + k)
		if _, err := s.client.PutObject(ctx, bucket, k, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func (s *server) resolver(t *testing.T) *checkpoints.Resolver {
	t.Helper()
	r, err := checkpoints.New(checkpoints.Config{Endpoint: s.endpoint, AccessKeyID: "flink", SecretAccessKey: "secret", Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLatestCompletedCheckpoint lays out a checkpoint directory as Flink
// writes it (chk-<n> with _metadata written last, shared/ and taskowned/
// beside them) and resolves it through the S3 protocol.
func TestLatestCompletedCheckpoint(t *testing.T) {
	s := startS3(t)
	s.put(t, "flink",
		"checkpoints/"+jobA+"/chk-1/_metadata",
		"checkpoints/"+jobA+"/chk-2/_metadata",
		"checkpoints/"+jobA+"/chk-2/0b1f-state",
		"checkpoints/"+jobA+"/chk-10/_metadata",  // numerically newest, lexically not
		"checkpoints/"+jobA+"/chk-11/8c2e-state", // in progress: no _metadata yet
		"checkpoints/"+jobA+"/shared/9d3f-sst",
		"checkpoints/"+jobA+"/taskowned/x",
		"checkpoints/"+jobB+"/chk-99/_metadata", // another job's
		"checkpoints/"+jobB+"/chk-100/_metadata",
	)
	r := s.resolver(t)
	ctx := context.Background()
	for _, dir := range []string{"s3://flink/checkpoints", "s3://flink/checkpoints/", "s3a://flink/checkpoints"} {
		got, err := r.Latest(ctx, dir, jobA)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		scheme, _, _ := strings.Cut(dir, "://")
		want := scheme + "://flink/checkpoints/" + jobA + "/chk-10"
		if got.Path != want || got.ID != 10 || got.CompletedAt.IsZero() {
			t.Errorf("%s: got %+v, want %s", dir, got, want)
		}
	}
	got, err := r.Latest(ctx, "s3://flink/checkpoints", jobB)
	if err != nil || got.ID != 100 {
		t.Errorf("job B: %+v, %v", got, err)
	}
}

func TestNoCompletedCheckpoint(t *testing.T) {
	s := startS3(t)
	s.put(t, "flink", "cp/"+jobA+"/chk-3/state", "cp/"+jobA+"/shared/x")
	r := s.resolver(t)
	ctx := context.Background()
	for _, tc := range []struct{ dir, job string }{
		{"s3://flink/cp", jobA}, // started, never completed
		{"s3://flink/cp", jobB}, // a job that never checkpointed
	} {
		if _, err := r.Latest(ctx, tc.dir, tc.job); !errors.Is(err, checkpoints.ErrNone) {
			t.Errorf("%s %s: err %v, want ErrNone", tc.dir, tc.job, err)
		}
	}
	// A bucket that does not exist is an error, not "none".
	if _, err := r.Latest(ctx, "s3://missing/cp", jobA); err == nil || errors.Is(err, checkpoints.ErrNone) {
		t.Errorf("missing bucket: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	s := startS3(t)
	r := s.resolver(t)
	for _, tc := range []struct{ dir, job, want string }{
		{"hdfs:///flink/cp", jobA, "not in S3-compatible storage"},
		{"s3:///cp", jobA, "no bucket"},
		{"s3://flink/cp", "../../etc", "not a Flink job id"},
	} {
		if _, err := r.Latest(context.Background(), tc.dir, tc.job); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.dir, tc.job, err, tc.want)
		}
	}
	if _, err := checkpoints.New(checkpoints.Config{}); err == nil {
		t.Error("New without an endpoint succeeded")
	}
}

func TestCheckpointIDs(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  []int64
	}{
		{nil, nil},
		{[]string{"chk-1/", "chk-10/", "chk-2/"}, []int64{10, 2, 1}},
		{[]string{"chk-3/_metadata", "chk-3/state", "chk-4"}, []int64{4, 3}},
		{[]string{"shared/", "taskowned/", "chk-/", "chk-x/", "chk-01/", "chk--1/", "savepoint-44cc55-1/"}, nil},
	} {
		if got := checkpoints.CheckpointIDs(tc.names); !slices.Equal(got, tc.want) {
			t.Errorf("CheckpointIDs(%q) = %v, want %v", tc.names, got, tc.want)
		}
	}
}
