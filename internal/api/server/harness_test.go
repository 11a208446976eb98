package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/api/server"
	controldrill "github.com/purser-io/purser/internal/control/drill"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/outbox"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/seal/sealtest"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// The users of every test, and what the policy lets them do:
//   - admin: everything, clusters included
//   - alice: editor in team-a and team-b, approver in team-b
//   - bob: viewer in team-a
//   - carol: approver in team-a and team-b
//   - dave: editor in team-b
//   - mallory: authenticated, no role anywhere
//
// team-b requires approval of runnables and deployables. In team-a
// RoleBindings are denied, ClusterWorkflowTemplates granted and the
// custom kind Gizmo.example.com, which has no driver, placed opaque; in team-k
// (alice edits) only Jobs and ConfigMaps are allowed. Every namespace may
// give its runnables the priority classes urgent (5) and high (10); only
// team-a, top (100).
var users = []string{"admin", "alice", "bob", "carol", "dave", "mallory"}

func testPolicy() policy.PolicyFile {
	return policy.PolicyFile{
		Admins: []string{"admin"},
		PriorityClasses: map[string]policy.PriorityClass{
			"urgent": {Value: 5}, "high": {Value: 10}, "top": {Value: 100, Namespaces: []string{"team-a"}},
		},
		Namespaces: map[string]policy.NamespacePolicy{
			"team-a": {
				Roles: map[policy.Role][]string{
					policy.RoleViewer: {"bob"}, policy.RoleEditor: {"alice"}, policy.RoleApprover: {"carol"},
				},
				Kinds: policy.KindRules{
					Deny:          []string{"RoleBinding.rbac.authorization.k8s.io"},
					ClusterScoped: []string{"ClusterWorkflowTemplate.argoproj.io"},
					Opaque:        []string{"Gizmo.example.com"},
				},
			},
			"team-k": {
				Roles: map[policy.Role][]string{policy.RoleEditor: {"alice"}},
				Kinds: policy.KindRules{Allow: []string{"Job.batch", "ConfigMap"}},
			},
			"team-b": {
				Roles: map[policy.Role][]string{
					policy.RoleEditor: {"alice", "dave"}, policy.RoleApprover: {"carol", "alice"},
				},
				Approval: policy.Approval{Runnables: true, Deployables: true},
			},
		},
	}
}

// harness is a real API: an HTTP server over a real database of one
// engine, with a real NATS and the outbox relay running.
type harness struct {
	t       testing.TB
	dsn     string
	url     string
	store   *store.Store
	sealer  *seal.Sealer
	nats    *streamtest.Server
	streams *stream.Client
	tokens  map[string]string
	raw     *sql.DB
	// identities follow the tokens and policy files at policyFile's
	// folder, as the api's do; setPolicy rewrites the policy.
	identities *auth.Identities
	policyFile string
}

// option changes the API's configuration or its HTTP server's.
type option func(cfg *server.Config, hs *http.Server)

func newHarness(t testing.TB, eng storetest.Engine, opts ...option) *harness {
	t.Helper()
	return newHarnessDSN(t, eng.NewDSN(t), opts...)
}

// newHarnessDSN starts the API on dsn; opts change its configuration.
func newHarnessDSN(t testing.TB, dsn string, opts ...option) *harness {
	t.Helper()
	ctx := context.Background()
	h := &harness{t: t, dsn: dsn, tokens: map[string]string{}}
	var err error
	if h.store, err = store.Open(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.store.Close() })
	h.raw = storetest.RawDB(t, dsn)

	var tf auth.TokensFile
	for _, u := range users {
		tok := auth.NewToken()
		h.tokens[u] = tok
		tf.Tokens = append(tf.Tokens, auth.TokenEntry{User: u, SHA256: auth.HashToken(tok)})
	}
	dir := t.TempDir()
	tokensFile := filepath.Join(dir, "tokens.yaml")
	h.policyFile = filepath.Join(dir, "policy.yaml")
	writeYAML(t, tokensFile, tf)
	writeYAML(t, h.policyFile, testPolicy())
	if h.identities, err = auth.LoadIdentities(auth.IdentitiesConfig{TokensFile: tokensFile, PolicyFile: h.policyFile, Interval: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	ictx, stopIdentities := context.WithCancel(ctx)
	identitiesDone := make(chan struct{})
	go func() { _ = h.identities.Run(ictx); close(identitiesDone) }()
	t.Cleanup(func() { stopIdentities(); <-identitiesDone })
	h.sealer, _ = sealtest.New(t)

	h.nats = streamtest.Start(t, "")
	h.streams = streamtest.Declared(t, h.nats.URL)
	relay := outbox.NewRelay(outbox.StoreSource(h.store), h.streams, outbox.Config{Interval: 200 * time.Millisecond})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("outbox relay: %v", err)
		}
	})

	cfg := server.Config{
		Store: h.store, Stream: h.streams, Outbox: relay, Identities: h.identities, Sealer: h.sealer,
		Anchors: startAnchors(t, h.store, h.streams), DrillSnapshot: controldrill.Snapshotter(controldrill.Options{}),
	}
	// The suites send hundreds of requests without a valid token on
	// purpose; TestRateLimits tests the limit itself.
	cfg.Limits = server.Limits{FailedAuthBurst: 1 << 20}
	if _, bench := t.(*testing.B); bench {
		// Benchmarks measure the server, not its rate limit.
		cfg.Limits = server.Limits{UserRate: 1e9, UserBurst: 1 << 30, FailedAuthBurst: 1 << 20}
	}
	hs := &http.Server{}
	server.ConfigureHTTPServer(hs)
	for _, o := range opts {
		o(&cfg, hs)
	}
	srv := httptest.NewUnstartedServer(server.New(cfg))
	srv.Config.ReadHeaderTimeout, srv.Config.ReadTimeout, srv.Config.WriteTimeout = hs.ReadHeaderTimeout, hs.ReadTimeout, hs.WriteTimeout
	srv.Config.IdleTimeout, srv.Config.MaxHeaderBytes = hs.IdleTimeout, hs.MaxHeaderBytes
	srv.Start()
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

// response is an answer of the API.
type response struct {
	code   int
	header http.Header
	raw    []byte
	body   map[string]any
}

// do sends a request as user ("" sends no token).
func (h *harness) do(user, method, path, contentType string, body []byte) response {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), method, h.url+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+h.tokens[user])
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := response{code: resp.StatusCode, header: resp.Header, raw: raw}
	// Not every answer is JSON (YAML, event streams, plain text): body
	// stays nil for those, and raw holds them.
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func (h *harness) yaml(user, method, path, body string) response {
	h.t.Helper()
	return h.do(user, method, path, "application/yaml", []byte(body))
}

func (h *harness) get(user, path string) response {
	h.t.Helper()
	return h.do(user, http.MethodGet, path, "", nil)
}

// decide approves or rejects (verb) the pending change of the object at
// path as user, after reading it as that user, as an approver reviews a
// change before deciding.
func (h *harness) decide(user, path, verb string) response {
	h.t.Helper()
	read := h.get(user, path)
	rv := read.str("status", "pendingChange", "resourceVersion")
	if rv == "" {
		rv = read.str("metadata", "resourceVersion")
	}
	return h.do(user, http.MethodPost, path+"/"+verb+"?resourceVersion="+rv, "", nil)
}

// want fails the test unless the answer has the status code.
func (r response) want(t *testing.T, code int) response {
	t.Helper()
	if r.code != code {
		t.Fatalf("status %d, want %d: %s", r.code, code, r.raw)
	}
	return r
}

// str reads a nested string field of the answer.
func (r response) str(path ...string) string {
	var cur any = r.body
	for _, p := range path {
		m, _ := cur.(map[string]any)
		cur = m[p]
	}
	s, _ := cur.(string)
	return s
}

func (r response) items() []map[string]any {
	list, _ := r.body["items"].([]any)
	out := make([]map[string]any, len(list))
	for i, it := range list {
		out[i], _ = it.(map[string]any)
	}
	return out
}

// count returns the number of rows of a table, read behind the API's back.
func (h *harness) count(table string) int {
	h.t.Helper()
	var n int
	if err := h.raw.QueryRowContext(h.t.Context(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// counts is the number of rows of every table a request could write,
// but the outbox, which the relay drains on its own.
func (h *harness) counts() map[string]int {
	out := map[string]int{}
	for _, table := range []string{"runnables", "deployables", "clusters", "audit_log", "attempts", "leftover_copies"} {
		out[table] = h.count(table)
	}
	return out
}

// submissions reads the submissions stream through the submitters'
// durable consumer until want messages came, then, once the outbox is
// empty (nothing more will be published), whatever else the stream holds,
// and returns the messages' ids.
func (h *harness) submissions(want int) []string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), streamtest.Timeout)
	defer cancel()
	cons, err := h.streams.JetStream().Consumer(ctx, stream.SubmissionsStream, stream.SubmitterConsumer)
	if err != nil {
		h.t.Fatal(err)
	}
	var ids []string
	take := func(batch jetstream.MessageBatch) {
		for m := range batch.Messages() {
			ids = append(ids, m.Headers().Get(jetstream.MsgIDHeader))
			if err := m.Ack(); err != nil {
				h.t.Fatalf("ack submission %s: %v", m.Headers().Get(jetstream.MsgIDHeader), err)
			}
		}
	}
	sandboxtest.Eventually(h.t, streamtest.Timeout, fmt.Sprintf("%d submissions on the stream", want), func(context.Context) error {
		batch, err := cons.Fetch(100, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			return err
		}
		take(batch)
		if len(ids) < want {
			return fmt.Errorf("%d so far: %v", len(ids), ids)
		}
		return nil
	})
	sandboxtest.Eventually(h.t, streamtest.Timeout, "outbox drained", func(context.Context) error {
		if n := h.count("outbox"); n != 0 {
			return fmt.Errorf("%d rows", n)
		}
		return nil
	})
	batch, err := cons.FetchNoWait(100)
	if err != nil {
		h.t.Fatal(err)
	}
	take(batch)
	return ids
}

// waitReady waits until /readyz answers 200.
func (h *harness) waitReady(t *testing.T, what string) {
	t.Helper()
	sandboxtest.Eventually(t, streamtest.Timeout, what, func(context.Context) error {
		if r := h.get("", "/readyz"); r.code != http.StatusOK {
			return fmt.Errorf("/readyz: %d %s", r.code, r.raw)
		}
		return nil
	})
}

func contains(haystack []byte, needles ...string) string {
	for _, n := range needles {
		if strings.Contains(string(haystack), n) {
			return n
		}
	}
	return ""
}

func writeYAML(t testing.TB, path string, v any) {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	// Written aside and renamed into place, as an operator's tools do: the
	// api polls the file and must never read it half written.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// setPolicy puts f in force as the policy file, until the test ends, and
// waits until the api decides by it.
func (h *harness) setPolicy(t testing.TB, f policy.PolicyFile) {
	t.Helper()
	apply := func(f policy.PolicyFile) {
		if data, err := yaml.Marshal(f); err == nil {
			if cur, err := os.ReadFile(h.policyFile); err == nil && bytes.Equal(cur, data) {
				return // in force already: nothing to reload
			}
		}
		before := h.identities.Reloads()
		writeYAML(t, h.policyFile, f)
		deadline := time.Now().Add(10 * time.Second)
		for h.identities.Reloads() == before {
			if time.Now().After(deadline) {
				t.Fatalf("the api did not reload the policy file (%v)", h.identities.Problem())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	apply(f)
	t.Cleanup(func() { apply(testPolicy()) })
}

// removeToken takes user's token out of the tokens file until the test
// ends, and waits until the api decides by it.
func (h *harness) removeToken(t testing.TB, user string) {
	t.Helper()
	tokensFile := filepath.Join(filepath.Dir(h.policyFile), "tokens.yaml")
	write := func(without string) {
		var tf auth.TokensFile
		for _, u := range users {
			if u != without {
				tf.Tokens = append(tf.Tokens, auth.TokenEntry{User: u, SHA256: auth.HashToken(h.tokens[u])})
			}
		}
		before := h.identities.Reloads()
		writeYAML(t, tokensFile, tf)
		deadline := time.Now().Add(10 * time.Second)
		for h.identities.Reloads() == before {
			if time.Now().After(deadline) {
				t.Fatal("the api did not reload the tokens file")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	write(user)
	t.Cleanup(func() { write("") })
}
