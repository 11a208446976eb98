// Package checkpoints finds where a Flink job can be restored from when
// all that is known is its checkpoint directory: the newest completed
// checkpoint under <state.checkpoints.dir>/<jobId>/ in S3-compatible
// storage. The failover controller uses it to turn a preserved job id into
// an exact restore point for the next attempt, rather than a job's
// directory, which Flink cannot restore from.
//
// Flink writes a checkpoint into <dir>/<jobId>/chk-<n>/ and writes its
// _metadata file last, once every task acknowledged it
// (org.apache.flink.runtime.state.filesystem.AbstractFsCheckpointStorageAccess:
// CHECKPOINT_DIR_PREFIX "chk-", METADATA_FILE_NAME "_metadata"; shared/
// and taskowned/ beside them hold state, not checkpoints). A chk-<n>
// without _metadata is in progress, failed or being discarded, and
// restoring from it fails; so the newest completed checkpoint is the
// highest n whose _metadata exists.
package checkpoints

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// ErrNone is returned when a job has no completed checkpoint.
var ErrNone = errors.New("no completed checkpoint")

// Config says how to reach the S3-compatible storage. The zero value of
// Region works with most servers.
type Config struct {
	// Endpoint is host:port of the S3 API.
	Endpoint        string
	AccessKeyID     string
	SecretAccessKey string
	// Insecure uses plain HTTP.
	Insecure bool
	Region   string
}

// Resolver finds checkpoints. It is safe for concurrent use.
type Resolver struct {
	client *minio.Client
}

// New returns a Resolver for the storage of cfg. It does not connect.
func New(cfg Config) (*Resolver, error) {
	if cfg.Endpoint == "" {
		return nil, errors.New("checkpoint storage: endpoint is required")
	}
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, ""),
		Secure: !cfg.Insecure,
		Region: cfg.Region,
		// Path-style addressing: bucket names in the path work with every
		// S3-compatible server, virtual hosts need DNS for each bucket.
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint storage %s: %w", cfg.Endpoint, err)
	}
	return &Resolver{client: client}, nil
}

// Checkpoint is a completed checkpoint.
type Checkpoint struct {
	// Path is the checkpoint's directory as Flink names it, in the scheme
	// of the configured directory: what spec.job.initialSavepointPath
	// takes.
	Path string
	// ID is n of chk-<n>.
	ID int64
	// CompletedAt is when its _metadata was written.
	CompletedAt time.Time
}

// Latest returns the newest completed checkpoint of jobID under dir, a
// Flink checkpoint directory such as s3://bucket/checkpoints (schemes s3,
// s3a, s3p). It returns an error wrapping ErrNone when there is none.
func (r *Resolver) Latest(ctx context.Context, dir, jobID string) (Checkpoint, error) {
	loc, err := parseDir(dir)
	if err != nil {
		return Checkpoint{}, err
	}
	if !validJobID(jobID) {
		return Checkpoint{}, fmt.Errorf("job id %q is not a Flink job id (32 hex digits)", jobID)
	}
	jobPrefix := loc.prefix + jobID + "/"
	var names []string
	for obj := range r.client.ListObjects(ctx, loc.bucket, minio.ListObjectsOptions{Prefix: jobPrefix + "chk-"}) {
		if obj.Err != nil {
			return Checkpoint{}, fmt.Errorf("list %s: %w", loc.url(jobPrefix), obj.Err)
		}
		names = append(names, strings.TrimPrefix(obj.Key, jobPrefix))
	}
	for _, id := range CheckpointIDs(names) {
		key := fmt.Sprintf("%schk-%d/_metadata", jobPrefix, id)
		info, err := r.client.StatObject(ctx, loc.bucket, key, minio.StatObjectOptions{})
		if err != nil {
			if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
				continue // not completed
			}
			return Checkpoint{}, fmt.Errorf("stat %s: %w", loc.url(key), err)
		}
		return Checkpoint{Path: loc.url(fmt.Sprintf("%schk-%d", jobPrefix, id)), ID: id, CompletedAt: info.LastModified}, nil
	}
	return Checkpoint{}, fmt.Errorf("%s: %w", loc.url(jobPrefix), ErrNone)
}

// CheckpointIDs returns the n of every chk-<n> entry in names (entries of
// a job's directory, with or without a trailing slash or a file below),
// newest first, each once.
func CheckpointIDs(names []string) []int64 {
	var ids []int64
	for _, name := range names {
		first, _, _ := strings.Cut(strings.TrimSuffix(name, "/"), "/")
		rest, ok := strings.CutPrefix(first, "chk-")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || n < 0 || strconv.FormatInt(n, 10) != rest {
			continue
		}
		ids = append(ids, n)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	slices.Reverse(ids)
	return ids
}

// location is a parsed checkpoint directory.
type location struct {
	scheme, bucket string
	prefix         string // "" or ending in "/"
}

// parseDir checks a checkpoint directory and splits it.
func parseDir(dir string) (location, error) {
	u, err := url.Parse(strings.TrimSpace(dir))
	if err != nil {
		return location{}, fmt.Errorf("checkpoint directory %q: %w", dir, err)
	}
	switch u.Scheme {
	case "s3", "s3a", "s3p":
	default:
		return location{}, fmt.Errorf("checkpoint directory %q: not in S3-compatible storage (want s3://bucket/path)", dir)
	}
	if u.Host == "" {
		return location{}, fmt.Errorf("checkpoint directory %q: no bucket", dir)
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		prefix += "/"
	}
	return location{scheme: u.Scheme, bucket: u.Host, prefix: prefix}, nil
}

func (l location) url(key string) string { return l.scheme + "://" + l.bucket + "/" + key }

func validJobID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range id {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}
