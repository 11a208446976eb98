package syncer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/seal/sealtest"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/member/clusters/clusterstest"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// Three shared clusters, sandbox-1..3 labelled dc=dc-1..3. Tests that use
// them run one at a time (none is parallel): a syncer treats objects with
// its label that its database does not know as orphans.
var env = sandboxtest.New(sandboxtest.Config{Clusters: 3})

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// wait bounds every wait on the sandbox: generous, since it measures
// nothing; latencies are logged and benchmarked instead.
const wait = 2 * time.Minute

// logBuffer collects a syncer's log lines for inspection (Secret values
// must never be among them).
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fixture is a database of one engine with the shared clusters registered,
// and whatever syncers a test starts on it.
type fixture struct {
	t        testing.TB
	dsn      string
	store    *store.Store
	sealer   *seal.Sealer
	clusters []*sandbox.Cluster
	kube     map[string]kubernetes.Interface
	logs     *logBuffer
	ns       string
}

func newFixture(t testing.TB, dsn string) *fixture {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sealer, _ := sealtest.New(t)
	f := &fixture{t: t, dsn: dsn, store: st, sealer: sealer, kube: map[string]kubernetes.Interface{}, logs: &logBuffer{},
		ns: "t-" + randomHex(4)}
	for _, c := range env.Clusters(t) {
		f.register(c, c.Labels())
	}
	t.Cleanup(f.cleanupNamespace)
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("PURSER_SYNCER_TEST_LOGS") != "" {
			t.Logf("syncer logs:\n%s", f.logs)
		}
	})
	return f
}

// register writes a cluster row as the API would: kubeconfig sealed.
func (f *fixture) register(c *sandbox.Cluster, labels map[string]string) {
	f.t.Helper()
	kc, err := c.Kubeconfig("")
	if err != nil {
		f.t.Fatal(err)
	}
	clusterstest.Register(f.t, f.store, f.sealer, store.Cluster{Name: c.Name(), Labels: labels}, kc)
	client, err := c.Client()
	if err != nil {
		f.t.Fatal(err)
	}
	f.clusters = append(f.clusters, c)
	f.kube[c.Name()] = client
}

// cleanupNamespace leaves the shared clusters as the test found them.
func (f *fixture) cleanupNamespace() {
	for _, client := range f.kube {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), f.ns, metav1.DeleteOptions{})
	}
}

type syncerOpts struct {
	stream   *stream.Client
	identity string
	resync   time.Duration
	lease    time.Duration
	workers  int
	hook     func(cluster string, working bool)
	policy   policy.KindPolicy
	// noIdentityCheck leaves rebuilt clusters to the resync alone.
	noIdentityCheck bool
}

// start runs a syncer until the returned stop is called (or the test ends)
// and checks that Run returns once its context is done.
func (f *fixture) start(o syncerOpts) (*Syncer, func()) {
	f.t.Helper()
	s := New(Config{
		Store: f.store, Sealer: f.sealer, Stream: o.stream, Identity: o.identity,
		ResyncPeriod: o.resync, LeaseDuration: o.lease, Workers: o.workers, Policy: o.policy,
		Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	s.hook = o.hook
	if o.noIdentityCheck {
		s.identityCheck = 24 * time.Hour
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					f.t.Errorf("Run: %v", err)
				}
			case <-time.After(wait):
				f.t.Errorf("Run did not return within %s of its context ending", wait)
			}
		})
	}
	f.t.Cleanup(stop)
	return s, stop
}

// put creates or updates a deployable as the API does: a Secret's values
// sealed apart, generation + 1 on every change.
func (f *fixture) put(name string, tmpl map[string]any, p v1alpha1.Placement) *store.Deployable {
	f.t.Helper()
	return f.putAs(nil, name, tmpl, p)
}

// putAs is put with the author the API records.
func (f *fixture) putAs(author *store.Author, name string, tmpl map[string]any, p v1alpha1.Placement) *store.Deployable {
	f.t.Helper()
	spec := v1alpha1.DeployableSpec{Template: tmpl, Placement: p}
	var secret []byte
	hash := v1alpha1.SpecHash(spec)
	if tmpl["kind"] == "Secret" {
		plain, values, err := seal.SplitSecret(tmpl)
		if err != nil {
			f.t.Fatal(err)
		}
		spec.Template = plain
		if secret, err = f.sealer.Seal(values, seal.SecretBinding(f.ns, name)); err != nil {
			f.t.Fatal(err)
		}
		hash = v1alpha1.SpecHash(spec) + "-" + f.sealer.Fingerprint(values)[:16]
	}
	doc, err := json.Marshal(store.Document[v1alpha1.DeployableSpec]{Spec: spec, Author: author})
	if err != nil {
		f.t.Fatal(err)
	}
	var rec *store.Deployable
	ctx := context.Background()
	err = f.store.Tx(ctx, func(tx *store.Tx) error {
		var err error
		rec, err = tx.Deployables().Get(ctx, f.ns, name)
		if errors.Is(err, store.ErrNotFound) {
			rec = &store.Deployable{Namespace: f.ns, Name: name, UID: randomHex(16), Generation: 1, Spec: doc, Secret: secret, SpecHash: hash}
			return tx.Deployables().Create(ctx, rec)
		}
		if err != nil {
			return err
		}
		rec.Spec, rec.Secret, rec.SpecHash, rec.DeletedAt = doc, secret, hash, nil
		rec.Generation++
		return tx.Deployables().Update(ctx, rec)
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return rec
}

// del tombstones a deployable, as DELETE does.
func (f *fixture) del(name string) {
	f.t.Helper()
	ctx := context.Background()
	err := f.store.Tx(ctx, func(tx *store.Tx) error {
		rec, err := tx.Deployables().Get(ctx, f.ns, name)
		if err != nil {
			return err
		}
		now := time.Now()
		rec.DeletedAt = &now
		return tx.Deployables().Update(ctx, rec)
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) statuses(ctx context.Context, uid string) (map[string]*store.DeployableClusterStatus, error) {
	out := map[string]*store.DeployableClusterStatus{}
	err := f.store.Read(ctx, func(tx *store.Tx) error {
		all, err := tx.Deployables().ListStatus(ctx, uid)
		for _, st := range all {
			out[st.Cluster] = st
		}
		return err
	})
	return out, err
}

// waitSynced waits until every cluster in want reports Synced at the
// deployable's generation.
func (f *fixture) waitSynced(rec *store.Deployable, want ...string) {
	f.t.Helper()
	sandboxtest.Eventually(f.t, wait, fmt.Sprintf("%s synced at generation %d on %v", rec.Name, rec.Generation, want), func(ctx context.Context) error {
		sts, err := f.statuses(ctx, rec.UID)
		if err != nil {
			return err
		}
		for _, c := range want {
			st := sts[c]
			if st == nil || st.State != "Synced" || st.SyncedGeneration != rec.Generation || st.Message != "" {
				return fmt.Errorf("%s: %+v", c, st)
			}
		}
		return nil
	})
}

func (f *fixture) configMap(ctx context.Context, cluster, name string) (*corev1.ConfigMap, error) {
	return f.kube[cluster].CoreV1().ConfigMaps(f.ns).Get(ctx, name, metav1.GetOptions{})
}

// waitConfigMapData waits until the ConfigMap on cluster has data[key] ==
// value, or is absent when value is "".
func (f *fixture) waitConfigMapData(cluster, name, key, value string) {
	f.t.Helper()
	sandboxtest.Eventually(f.t, wait, fmt.Sprintf("configmap %s on %s has %s=%q", name, cluster, key, value), func(ctx context.Context) error {
		cm, err := f.configMap(ctx, cluster, name)
		if value == "" {
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			return errors.New("still there")
		}
		if err != nil {
			return err
		}
		if cm.Data[key] != value {
			return fmt.Errorf("data %v", cm.Data)
		}
		return nil
	})
}

func (f *fixture) waitSecretValue(cluster, name, key, value string) {
	f.t.Helper()
	sandboxtest.Eventually(f.t, wait, fmt.Sprintf("secret %s on %s", name, cluster), func(ctx context.Context) error {
		s, err := f.kube[cluster].CoreV1().Secrets(f.ns).Get(ctx, name, metav1.GetOptions{})
		if value == "" {
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			return errors.New("still there")
		}
		if err != nil {
			return err
		}
		if string(s.Data[key]) != value {
			return errors.New("value differs")
		}
		return nil
	})
}

// waitPurged waits until the tombstone of rec is gone from the store.
func (f *fixture) waitPurged(rec *store.Deployable) {
	f.t.Helper()
	sandboxtest.Eventually(f.t, wait, rec.Name+" purged", func(ctx context.Context) error {
		return f.store.Read(ctx, func(tx *store.Tx) error {
			_, err := tx.Deployables().GetByUID(ctx, rec.UID)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err == nil {
				return errors.New("still stored")
			}
			return err
		})
	})
}

func configMapTemplate(data map[string]any) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": data}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func names(cs ...*sandbox.Cluster) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name()
	}
	return out
}

var _ = strings.Contains
