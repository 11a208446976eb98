package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/seal/sealtest"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// adminAPI is the real API over a real database (the first engine), with
// one user, "admin", an admin of the policy: what a command's test talks
// to when it needs no member cluster.
type adminAPI struct {
	st    *store.Store
	srv   *httptest.Server
	token string
}

// newAdminAPI starts it; cfg gives the server's optional parts (its
// store, tokens, policy and sealer are the ones made here). The CLI's
// own configuration is kept out of the user's home.
func newAdminAPI(t *testing.T, cfg server.Config) *adminAPI {
	t.Helper()
	t.Setenv("PURSER_CONFIG", filepath.Join(t.TempDir(), "config"))
	st, err := store.Open(context.Background(), storetest.Engines()[0].NewDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	token := auth.NewToken()
	tokens, err := auth.NewAuthenticator(auth.TokensFile{Tokens: []auth.TokenEntry{{User: "admin", SHA256: auth.HashToken(token)}}})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.NewPolicy(policy.PolicyFile{Admins: []string{"admin"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Tokens, cfg.Policy = st, tokens, pol
	cfg.Sealer, _ = sealtest.New(t)
	srv := httptest.NewServer(server.New(cfg))
	t.Cleanup(srv.Close)
	return &adminAPI{st: st, srv: srv, token: token}
}

// post sends body (YAML) to path as the admin and fails the test unless
// the API accepted it.
func (a *adminAPI) post(t *testing.T, path, body string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, a.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("POST %s: %d", path, resp.StatusCode)
	}
}
