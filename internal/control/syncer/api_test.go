package syncer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// Through the real API: a Secret deployable PUT over HTTP reaches every
// cluster, its per-cluster status shows in GET, DELETE removes it
// everywhere; and its value is nowhere to be found afterwards: not in the
// API's answers, not in the audit log or any other table, not in the logs
// of the API or the syncer.
func TestSecretDeployableThroughTheAPI(t *testing.T) {
	f := newFixture(t, storetest.Engines()[0].NewDSN(t))
	token := auth.NewToken()
	tokens, err := auth.NewAuthenticator(auth.TokensFile{Tokens: []auth.TokenEntry{{User: "admin", SHA256: auth.HashToken(token)}}})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.NewPolicy(policy.PolicyFile{Admins: []string{"admin"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.New(server.Config{
		Store: f.store, Tokens: tokens, Policy: pol, Sealer: f.sealer,
		Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}))
	t.Cleanup(srv.Close)
	var answers bytes.Buffer
	call := func(ctx context.Context, method, path string, body any) (int, map[string]any, error) {
		var r io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			r = bytes.NewReader(b)
		}
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, r)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return resp.StatusCode, nil, err
		}
		answers.Write(raw)
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			return resp.StatusCode, nil, fmt.Errorf("%s %s answered %d, not a JSON object: %w: %s", method, path, resp.StatusCode, err, raw)
		}
		return resp.StatusCode, out, nil
	}

	f.start(syncerOpts{})
	pw := "pw-" + randomHex(12)
	path := "/api/v1/deployables/" + f.ns + "/api-secret"
	code, _, err := call(context.Background(), "PUT", path, map[string]any{
		"apiVersion": "purser.io/v1alpha1", "kind": "Deployable",
		"metadata": map[string]any{"name": "api-secret", "namespace": f.ns},
		"spec": map[string]any{"template": map[string]any{
			"apiVersion": "v1", "kind": "Secret", "stringData": map[string]any{"password": pw},
		}},
	})
	if err != nil || code != http.StatusCreated {
		t.Fatalf("PUT: %d %v", code, err)
	}
	all := names(f.clusters...)
	for _, c := range all {
		f.waitSecretValue(c, "api-secret", "password", pw)
	}
	sandboxtest.Eventually(t, wait, "per-cluster status in the API", func(ctx context.Context) error {
		code, obj, err := call(ctx, "GET", path, nil)
		if err != nil {
			return fmt.Errorf("GET: %w", err)
		}
		if code != http.StatusOK {
			return fmt.Errorf("GET: %d", code)
		}
		status, _ := obj["status"].(map[string]any)
		clusters, _ := status["clusters"].([]any)
		synced := 0
		for _, x := range clusters {
			c, _ := x.(map[string]any)
			if c["state"] == "Synced" && c["syncedGeneration"] == float64(1) {
				synced++
			}
		}
		if synced != len(all) {
			return fmt.Errorf("status %v", status)
		}
		return nil
	})

	assertNoSecret(t, f, pw) // while the sealed row is stored, too

	if code, _, err := call(context.Background(), "DELETE", path, nil); err != nil || code != http.StatusOK {
		t.Fatalf("DELETE: %d %v", code, err)
	}
	for _, c := range all {
		f.waitSecretValue(c, "api-secret", "password", "")
	}
	sandboxtest.Eventually(t, wait, "deployable gone from the API", func(ctx context.Context) error {
		code, _, err := call(ctx, "GET", path, nil)
		if err != nil {
			return fmt.Errorf("GET: %w", err)
		}
		if code != http.StatusNotFound {
			return fmt.Errorf("GET: %d", code)
		}
		return nil
	})
	if strings.Contains(answers.String(), pw) {
		t.Error("a Secret value appears in an API answer")
	}
	assertNoSecret(t, f, pw)
}
