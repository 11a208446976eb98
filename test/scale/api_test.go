package scale_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/seal/sealtest"
	"github.com/purser-io/purser/internal/hub/store"
)

// apiClient reads the inventory through purser's HTTP API: the real
// server (internal/api/server, the handler of GET /api/v1/inventory) on
// its own connection pool to the database, as the api component of a
// split deployment has, with one admin token.
type apiClient struct {
	url   string
	token string
	http  *http.Client
}

func startAPI(t testing.TB, s *store.Store) *apiClient {
	t.Helper()
	token := auth.NewToken()
	tokens, err := auth.NewAuthenticator(auth.TokensFile{Tokens: []auth.TokenEntry{{User: "bench", SHA256: auth.HashToken(token)}}})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.NewPolicy(policy.PolicyFile{Admins: []string{"bench"}})
	if err != nil {
		t.Fatal(err)
	}
	sealer, _ := sealtest.New(t)
	srv := httptest.NewServer(server.New(server.Config{Store: s, Tokens: tokens, Policy: pol, Sealer: sealer,
		// The benchmark measures the server, not its per-user rate limit.
		Limits: server.Limits{UserRate: 1e9, UserBurst: 1 << 30}}))
	t.Cleanup(srv.Close)
	return &apiClient{url: srv.URL, token: token, http: &http.Client{Timeout: time.Minute}}
}

// inventoryPage is as much of an answer as the client reads.
type inventoryPage struct {
	Items    []json.RawMessage `json:"items"`
	Continue string            `json:"continue"`
}

// list asks for one page and returns it and how long the answer took to
// arrive whole; decoding it is not timed.
func (c *apiClient) list(ctx context.Context, q url.Values) (inventoryPage, time.Duration, error) {
	var p inventoryPage
	req, err := http.NewRequestWithContext(ctx, "GET", c.url+"/api/v1/inventory?"+q.Encode(), http.NoBody)
	if err != nil {
		return p, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return p, 0, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	took := time.Since(start)
	if err != nil {
		return p, took, err
	}
	if resp.StatusCode != http.StatusOK {
		return p, took, fmt.Errorf("GET %s: %d %s", q.Encode(), resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return p, took, fmt.Errorf("GET %s: %w", q.Encode(), err)
	}
	return p, took, nil
}
