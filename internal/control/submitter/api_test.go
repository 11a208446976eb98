package submitter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/outbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// api serves the real REST API over the fixture's database and stream,
// with the outbox relay running, and answers as the admin.
type api struct {
	t     *testing.T
	url   string
	token string
}

func (f *fixture) api() *api {
	f.t.Helper()
	token := auth.NewToken()
	tokens, err := auth.NewAuthenticator(auth.TokensFile{Tokens: []auth.TokenEntry{{User: "admin", SHA256: auth.HashToken(token)}}})
	if err != nil {
		f.t.Fatal(err)
	}
	pol, err := policy.NewPolicy(policy.PolicyFile{Admins: []string{"admin"}})
	if err != nil {
		f.t.Fatal(err)
	}
	relay := outbox.NewRelay(outbox.StoreSource(f.store), f.streams, outbox.Config{Interval: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := relay.Run(ctx); err != nil {
			f.t.Errorf("outbox relay: %v", err)
		}
	}()
	f.t.Cleanup(func() { cancel(); <-done })
	srv := httptest.NewServer(server.New(server.Config{
		Store: f.store, Stream: f.streams, Outbox: relay, Tokens: tokens, Policy: pol, Sealer: f.sealer,
		// The tests and the benchmark measure the submitter, not the
		// API's per-user limit, which the benchmark's burst would meet.
		Limits: server.Limits{UserRate: 1e9, UserBurst: 1 << 30},
	}))
	f.t.Cleanup(srv.Close)
	return &api{t: f.t, url: srv.URL, token: token}
}

func (a *api) do(method, path string, body any, want int) *v1alpha1.Runnable {
	a.t.Helper()
	var r *bytes.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		r = bytes.NewReader(data)
	} else {
		r = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(a.t.Context(), method, a.url+path, r)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out v1alpha1.Runnable
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		a.t.Fatalf("%s %s: %d, no JSON answer: %v", method, path, resp.StatusCode, err)
	}
	if resp.StatusCode != want {
		a.t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, raw, want)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		a.t.Fatalf("%s %s: not a runnable: %v\n%s", method, path, err, raw)
	}
	return &out
}

// TestThroughTheAPI submits and cancels through the REST API: the outbox,
// the relay and the work queue carry the submissions to the submitter.
func TestThroughTheAPI(t *testing.T) {
	f := newFixture(t, sqliteDSN(t))
	f.registerShared()
	a := f.api()
	f.start(submitter.Config{})
	path := "/api/v1/runnables/" + f.ns + "/"

	a.do("POST", "/api/v1/runnables", map[string]any{
		"apiVersion": v1alpha1.GroupVersion, "kind": "Runnable",
		"metadata": map[string]any{"name": "report", "namespace": f.ns},
		"spec":     map[string]any{"template": workflow()},
	}, http.StatusAccepted)
	f.waitPhase("report", v1alpha1.PhaseSubmitted)
	got := a.do("GET", path+"report", nil, http.StatusOK)
	if got.Status.Cluster == "" || len(got.Status.Attempts) != 1 || got.Status.Attempts[0].UID == "" {
		t.Fatalf("status %+v", got.Status)
	}
	cluster := got.Status.Cluster
	if objs := f.objects(cluster, workflows, got.Metadata.UID); len(objs) != 1 {
		t.Fatalf("%d workflows on %s", len(objs), cluster)
	}

	a.do("DELETE", path+"report", nil, http.StatusOK)
	sandboxtest.Eventually(t, wait, "workflow deleted after cancel", func(context.Context) error {
		if objs := f.objects(cluster, workflows, got.Metadata.UID); len(objs) != 0 {
			return fmt.Errorf("%d workflows left", len(objs))
		}
		st := a.do("GET", path+"report", nil, http.StatusOK).Status
		if st.Phase != v1alpha1.PhaseCancelled || st.Attempts[0].Result != "Cancelled" {
			return fmt.Errorf("phase %s, attempt %+v", st.Phase, st.Attempts[0])
		}
		return nil
	})
}
