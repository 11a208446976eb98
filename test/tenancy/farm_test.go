package tenancy

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/api/server"
	controldrill "github.com/purser-io/purser/internal/control/drill"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/control/syncer"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/outbox"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/member/agent"
	"github.com/purser-io/purser/internal/member/health"
	"github.com/purser-io/purser/internal/member/inventory"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

var env = sandboxtest.New(sandboxtest.Config{Clusters: 1})

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// wait bounds every wait for the farm to act: generous, since the suite
// asserts what happens, never how fast.
const wait = 2 * time.Minute

// farm is purser as it runs in production, in one test: the API on a
// database of one engine, NATS, the outbox relay, the submitter, the
// syncer, the ingester, and an agent beside a real sandbox cluster,
// registered through the API.
//
// Its people: admin (global admin); mallory, the hostile tenant, editor of
// her namespace (where RoleBindings are denied) and editor and approver of
// an approval namespace; victor, editor of the victim's namespace; carol,
// approver of the approval namespace. Namespaces carry a suffix of the farm, so that
// the farms of both engines share the sandbox cluster without meeting.
type farm struct {
	t       *testing.T
	dsn     string
	store   *store.Store
	raw     *sql.DB
	url     string
	tokens  map[string]string
	cluster *sandbox.Cluster
	// The namespaces: mallory's own, the victim's, the one needing
	// approval, and one of hers whose Pod Security level is privileged.
	own, victim, approval, privileged string
}

var people = []string{"admin", "mallory", "victor", "carol"}

func newFarm(t *testing.T, eng storetest.Engine) *farm {
	t.Helper()
	suffix := fmt.Sprintf("%x", time.Now().UnixNano()&0xffffff)
	f := &farm{t: t, dsn: eng.NewDSN(t), tokens: map[string]string{}, cluster: env.Clusters(t)[0],
		own: "mal-" + suffix, victim: "vic-" + suffix, approval: "appr-" + suffix, privileged: "priv-" + suffix}
	ctx := context.Background()
	var err error
	if f.store, err = store.Open(ctx, f.dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.store.Close() })
	f.raw = storetest.RawDB(t, f.dsn)

	var tf auth.TokensFile
	for _, u := range people {
		tok := auth.NewToken()
		f.tokens[u] = tok
		tf.Tokens = append(tf.Tokens, auth.TokenEntry{User: u, SHA256: auth.HashToken(tok)})
	}
	tokens, err := auth.NewAuthenticator(tf)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.NewPolicy(policy.PolicyFile{
		Admins: []string{"admin"},
		// Every namespace may use batch and normal; critical is the victim's.
		PriorityClasses: map[string]policy.PriorityClass{
			"batch": {Value: 0}, "normal": {Value: 10}, "critical": {Value: 1000, Namespaces: []string{f.victim}},
		},
		Namespaces: map[string]policy.NamespacePolicy{
			f.own: {
				Roles: map[policy.Role][]string{policy.RoleEditor: {"mallory"}},
				Kinds: policy.KindRules{Deny: []string{"RoleBinding.rbac.authorization.k8s.io"}},
			},
			f.victim: {Roles: map[policy.Role][]string{policy.RoleEditor: {"victor"}}},
			f.approval: {
				Roles:    map[policy.Role][]string{policy.RoleEditor: {"mallory"}, policy.RoleApprover: {"carol", "mallory"}},
				Approval: policy.Approval{Runnables: true, Deployables: true},
			},
			f.privileged: {Roles: map[policy.Role][]string{policy.RoleEditor: {"mallory"}}, PodSecurity: "privileged"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	key := bytes.Repeat([]byte{9}, seal.KeySize)
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	// As compose.OpenHub does for every writer: entries only purser can add.
	f.store.SetAuditMAC(audit.NewMAC(sealer.AuditKey()))
	nats := streamtest.Start(t, "")
	streams := streamtest.Declared(t, nats.URL)
	log := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	relay := outbox.NewRelay(outbox.StoreSource(f.store), streams, outbox.Config{Interval: 200 * time.Millisecond})
	interp, err := health.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	ingester, err := inventory.New(inventory.Config{Store: f.store, Stream: streamtest.Connect(t, nats.URL), Logger: log,
		Health: interp, Fingerprint: sealer.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	run(t, relay.Run)
	run(t, ingester.Run)
	run(t, submitter.New(submitter.Config{Store: f.store, Sealer: sealer, Stream: streamtest.Connect(t, nats.URL),
		Logger: log, Policy: pol}).Run)
	run(t, syncer.New(syncer.Config{Store: f.store, Sealer: sealer, Identity: "tenancy", Logger: log, Policy: pol}).Run)

	srv := httptest.NewUnstartedServer(server.New(server.Config{Store: f.store, Stream: streams, Outbox: relay,
		Tokens: tokens, Policy: pol, Sealer: sealer, Logger: log, DrillSnapshot: controldrill.Snapshotter(controldrill.Options{})}))
	server.ConfigureHTTPServer(srv.Config)
	srv.Start()
	t.Cleanup(srv.Close)
	f.url = srv.URL

	// The member cluster, registered as an admin does, and its agent.
	kc, err := f.cluster.Kubeconfig("")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"apiVersion": "purser.io/v1alpha1", "kind": "Cluster",
		"metadata": map[string]any{"name": "dc1"}, "spec": map[string]any{"kubeconfig": string(kc)}})
	f.do("admin", "POST", "/api/v1/clusters", body).want(t, http.StatusCreated)
	a, err := agent.New(agent.Config{Cluster: "dc1", RESTConfig: f.cluster.RESTConfig(), Stream: streamtest.Connect(t, nats.URL),
		SnapshotInterval: 5 * time.Second, HeartbeatInterval: time.Second, DiscoveryInterval: 2 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a.Run)
	t.Cleanup(func() {
		kube, err := f.cluster.Client()
		if err == nil {
			for _, ns := range []string{f.own, f.victim, f.approval, f.privileged} {
				_ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metaDelete)
			}
		}
	})
	return f
}

// run runs fn until the test ends, and waits for it to return.
func run(t *testing.T, fn func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("component stopped: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// answer is what the API said.
type answer struct {
	code   int
	header http.Header
	raw    []byte
	body   map[string]any
}

func (f *farm) do(user, method, path string, body []byte) answer {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), method, f.url+path, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if tok, ok := f.tokens[user]; ok {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/yaml")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{code: resp.StatusCode, header: resp.Header, raw: raw}
	// Not every answer is JSON (YAML, plain text): body stays nil for
	// those, and raw holds them.
	_ = json.Unmarshal(raw, &a.body)
	return a
}

func (f *farm) yaml(user, method, path, body string) answer {
	f.t.Helper()
	return f.do(user, method, path, []byte(body))
}

func (a answer) want(t *testing.T, code int) answer {
	t.Helper()
	if a.code != code {
		t.Fatalf("status %d, want %d: %s", a.code, code, a.raw)
	}
	return a
}

// str reads a nested string field.
func (a answer) str(path ...string) string {
	var cur any = a.body
	for _, p := range path {
		m, _ := cur.(map[string]any)
		cur = m[p]
	}
	s, _ := cur.(string)
	return s
}

// state is what a refused attempt must leave as it was: the rows that
// only requests write (runnables, deployables and clusters, and every
// version of the deployables, which only the API changes), and the audit
// entries of people, as opposed to those of purser's components, which
// go on placing and observing the victim's work meanwhile.
func (f *farm) state() string {
	f.t.Helper()
	var b strings.Builder
	for _, q := range []string{
		"SELECT COUNT(*) FROM runnables",
		// Not the deployables already deleted: the syncer removes their
		// rows once their copies are gone, whenever that is (an earlier
		// case's delete), and marking one deleted counts as a change.
		"SELECT COUNT(*) FROM deployables WHERE deleted_at IS NULL",
		"SELECT COALESCE(SUM(resource_version), 0) FROM deployables WHERE deleted_at IS NULL",
		"SELECT COUNT(*) FROM clusters",
		"SELECT COUNT(*) FROM placement_policies",
		"SELECT COALESCE(SUM(resource_version), 0) FROM placement_policies",
		"SELECT COUNT(*) FROM audit_log WHERE actor IN ('" + strings.Join(people, "', '") + "')",
		"SELECT COALESCE(MAX(seq), 0) FROM audit_log WHERE actor IN ('" + strings.Join(people, "', '") + "')",
	} {
		var n int64
		if err := f.raw.QueryRowContext(f.t.Context(), q).Scan(&n); err != nil {
			f.t.Fatal(err)
		}
		fmt.Fprintf(&b, "%d ", n)
	}
	return b.String()
}

// refused runs attempt, which must answer code, and checks that it
// changed nothing.
func (f *farm) refused(what string, code int, attempt func() answer) answer {
	f.t.Helper()
	before := f.state()
	a := attempt()
	if a.code != code {
		f.t.Errorf("%s: %d %s, want %d", what, a.code, a.raw, code)
	}
	if after := f.state(); after != before {
		f.t.Errorf("%s changed the database: %s -> %s", what, before, after)
	}
	return a
}

// eventually polls cond until it holds or wait passes.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	sandboxtest.Eventually(t, wait, what, func(context.Context) error { return cond() })
}

func runnable(ns, name, template string) string {
	return fmt.Sprintf("apiVersion: purser.io/v1alpha1\nkind: Runnable\nmetadata: {name: %s, namespace: %s}\nspec:\n  template:\n%s",
		name, ns, indent(template))
}

func deployable(ns, name, template string) string {
	return fmt.Sprintf("apiVersion: purser.io/v1alpha1\nkind: Deployable\nmetadata: {name: %s, namespace: %s}\nspec:\n  template:\n%s",
		name, ns, indent(template))
}

func indent(s string) string { return indentBy(s, "    ") }

// indentBy puts prefix before every line of s.
func indentBy(s, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(prefix + line)
	}
	return b.String()
}

const job = `apiVersion: batch/v1
kind: Job
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox}]
`

func configMap(name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {key: %q}\n", name, value)
}

// storeBehindTheAPI writes a runnable of mallory's own namespace straight
// to the database, Queued, as a writer with the database's password
// could: only the writers' own checks stand between it and the cluster.
func (f *farm) storeBehindTheAPI(ctx context.Context, name string, spec v1alpha1.RunnableSpec) {
	f.t.Helper()
	doc, err := json.Marshal(store.Document[v1alpha1.RunnableSpec]{Spec: spec, Author: &store.Author{Name: "mallory"}})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.store.Tx(ctx, func(tx *store.Tx) error {
		return tx.Runnables().Create(ctx, &store.Runnable{Namespace: f.own, Name: name, UID: name + "-" + f.own, Generation: 1,
			Spec: doc, SpecHash: "x", Phase: string(v1alpha1.PhaseQueued), Submitter: "mallory"})
	}); err != nil {
		f.t.Fatal(err)
	}
}

// refusedByTheSubmitter waits until the runnable name of mallory's
// namespace failed with its first attempt AdmissionDenied, the message
// saying each of want.
func (f *farm) refusedByTheSubmitter(ctx context.Context, name, what string, want ...string) {
	f.t.Helper()
	eventually(f.t, what, func() error {
		var r *store.Runnable
		var attempts []*store.Attempt
		err := f.store.Read(ctx, func(tx *store.Tx) (err error) {
			if r, err = tx.Runnables().Get(ctx, f.own, name); err != nil {
				return err
			}
			attempts, err = tx.Attempts().List(ctx, r.UID)
			return err
		})
		if err != nil {
			return err
		}
		if r.Phase != string(v1alpha1.PhaseFailed) || len(attempts) == 0 || attempts[0].Reason != "AdmissionDenied" {
			return fmt.Errorf("phase %s, attempts %+v", r.Phase, attempts)
		}
		for _, w := range want {
			if !strings.Contains(attempts[0].Message, w) {
				return fmt.Errorf("the refusal does not say %q: %s", w, attempts[0].Message)
			}
		}
		return nil
	})
}

// notOnTheCluster fails the test if a Job name of mallory's namespace is
// on the member cluster.
func (f *farm) notOnTheCluster(ctx context.Context, name string) {
	f.t.Helper()
	kube, err := f.cluster.Client()
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := kube.BatchV1().Jobs(f.own).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		f.t.Fatalf("Job %s, refused at the writer, reached the member cluster (%v)", name, err)
	}
}
