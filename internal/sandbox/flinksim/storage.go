package flinksim

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3bolt"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	bolt "go.etcd.io/bbolt"
)

// StorageFile is the file under a Storage's folder holding its objects.
const StorageFile = "objects.db"

// Credentials of a Storage. gofakes3 does not check signatures, but a
// client must sign with something.
const (
	StorageAccessKey = "flinksim"
	StorageSecretKey = "flinksim-secret"
)

// Storage is a local S3-compatible object store (gofakes3, served over
// real HTTP) standing in for the storage Flink writes its checkpoints and
// savepoints to. Its objects are kept in one file under its folder
// (gofakes3's bbolt backend, DIR/objects.db), so they outlive the process:
// a store started again on the folder serves them again. (gofakes3's
// file-per-object backend, s3afero, lists a prefix that ends inside a
// name, such as <job>/chk-, wrongly, and Flink's checkpoint directories
// are found by exactly such a list.)
type Storage struct {
	srv    *http.Server
	addr   string
	dir    string
	client *minio.Client
	db     *bolt.DB

	mu      sync.Mutex
	buckets map[string]bool // known to exist
	done    chan struct{}
}

// StartStorage serves a Storage kept in dir on addr (host:port; port 0
// picks a free one) until Close; ctx bounds the start only.
func StartStorage(ctx context.Context, dir, addr string) (*Storage, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("flink storage: %w", err)
	}
	// One bbolt file holds every bucket; it is locked while open, so a
	// second store on the folder fails after the timeout instead of
	// waiting for ever.
	db, err := bolt.Open(filepath.Join(dir, StorageFile), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("flink storage in %s: %w", dir, err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("flink storage: %w", err)
	}
	s := &Storage{
		srv:     &http.Server{Handler: gofakes3.New(s3bolt.New(db)).Server(), ReadHeaderTimeout: 10 * time.Second},
		db:      db,
		addr:    ln.Addr().String(),
		dir:     dir,
		buckets: map[string]bool{},
		done:    make(chan struct{}),
	}
	s.client, err = minio.New(s.addr, &minio.Options{
		Creds: credentials.NewStaticV4(StorageAccessKey, StorageSecretKey, ""),
		// Path-style: bucket names in the path, no DNS per bucket.
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		ln.Close()
		_ = db.Close()
		return nil, fmt.Errorf("flink storage: %w", err)
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Endpoint is host:port of the S3 API, over plain HTTP.
func (s *Storage) Endpoint() string { return s.addr }

// Dir is the folder holding the objects.
func (s *Storage) Dir() string { return s.dir }

// Close stops serving; the files stay.
func (s *Storage) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	<-s.done
	_ = s.db.Close()
}

// WriteMetadata is a Config.Checkpoints for simulators writing here: it
// writes the _metadata file of a completed checkpoint or savepoint at
// path (s3://bucket/key, schemes s3, s3a and s3p as Flink's S3 file
// systems take them), where Flink writes it last, once the snapshot is
// complete (AbstractFsCheckpointStorageAccess: METADATA_FILE_NAME). A
// bucket that does not exist yet is created, so any
// state.checkpoints.dir works without preparing the store.
func (s *Storage) WriteMetadata(ctx context.Context, path string) error {
	u, err := url.Parse(path)
	if err != nil {
		return fmt.Errorf("flink storage: %w", err)
	}
	switch u.Scheme {
	case "s3", "s3a", "s3p":
	default:
		return fmt.Errorf("flink storage: %s is not in S3 (want s3://bucket/path)", path)
	}
	key := strings.Trim(u.Path, "/")
	if u.Host == "" || key == "" {
		return fmt.Errorf("flink storage: %s names no bucket and key", path)
	}
	if err := s.ensureBucket(ctx, u.Host); err != nil {
		return err
	}
	body := []byte("checkpoint metadata of " + path + " (written by the Flink operator simulator)\n")
	_, err = s.client.PutObject(ctx, u.Host, key+"/_metadata", bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
	if err != nil {
		return fmt.Errorf("flink storage: write %s/_metadata: %w", path, err)
	}
	return nil
}

func (s *Storage) ensureBucket(ctx context.Context, bucket string) error {
	s.mu.Lock()
	known := s.buckets[bucket]
	s.mu.Unlock()
	if known {
		return nil
	}
	err := s.client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{})
	if code := minio.ToErrorResponse(err).Code; err != nil && code != "BucketAlreadyOwnedByYou" && code != "BucketAlreadyExists" {
		return fmt.Errorf("flink storage: create bucket %s: %w", bucket, err)
	}
	s.mu.Lock()
	s.buckets[bucket] = true
	s.mu.Unlock()
	return nil
}

// Objects lists the keys under prefix in bucket, for a person or a test
// looking at what the simulated jobs wrote.
func (s *Storage) Objects(ctx context.Context, bucket, prefix string) ([]string, error) {
	var keys []string
	for obj := range s.client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			if minio.ToErrorResponse(obj.Err).Code == minio.NoSuchBucket {
				return nil, nil
			}
			return nil, obj.Err
		}
		keys = append(keys, obj.Key)
	}
	return keys, nil
}
