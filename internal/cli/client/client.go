// Package client is the HTTP client of purser's REST API that the command
// line uses. It finds the server and token from flags, the environment
// (PURSER_SERVER, PURSER_TOKEN) or a context of the client config that
// `purser up` writes, names purser's kinds and their paths, and turns the
// API's error bodies back into errors that read as the server wrote them.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Client talks to one purser server.
type Client struct {
	cfg  Config
	http *http.Client
}

// New returns a client for a resolved config.
func New(cfg Config) *Client { return NewWithTransport(cfg, nil) }

// NewWithTransport is New sending its requests through rt (nil: the
// default transport), e.g. one that dials from inside a data center.
func NewWithTransport(cfg Config, rt http.RoundTripper) *Client {
	return &Client{cfg: cfg, http: &http.Client{Timeout: 60 * time.Second, Transport: rt}}
}

// Server is the URL of the server the client talks to.
func (c *Client) Server() string { return c.cfg.Server }

// Config is the configuration the client was made with.
func (c *Client) Config() Config { return c.cfg }

// Describe names the server, and the context it came from, for messages:
// a user with several contexts must see which one answered.
func (c *Client) Describe() string {
	if c.cfg.Context == "" {
		return "purser at " + c.cfg.Server
	}
	return fmt.Sprintf("purser at %s (context %s)", c.cfg.Server, c.cfg.Context)
}

// Do sends a request with an optional JSON or YAML body and decodes a JSON
// answer into out (when out is not nil). It returns the status code; an
// error answer of the API comes back as a *v1alpha1.Status.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body []byte, contentType string, out any) (int, error) {
	u := strings.TrimRight(c.cfg.Server, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		if contentType == "" {
			contentType = "application/json"
		}
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("cannot reach the server: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 400 {
		apiErr := decodeStatus(data)
		if apiErr == nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(data)))
		}
		return resp.StatusCode, apiErr
	}
	if out != nil && len(data) > 0 {
		// Numbers stay as the server wrote them (json.Number in decoded
		// objects), so that a count or a generation prints exactly.
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode answer of %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// decodeStatus reads a refusal as the REST API writes it, or as /k8s
// writes it (a Kubernetes Status, whose details hold the causes); nil when
// it is neither.
func decodeStatus(data []byte) *v1alpha1.Status {
	var raw struct {
		Code    int             `json:"code"`
		Reason  string          `json:"reason"`
		Message string          `json:"message"`
		Details json.RawMessage `json:"details"`
	}
	if json.Unmarshal(data, &raw) != nil || raw.Message == "" {
		return nil
	}
	st := &v1alpha1.Status{Code: raw.Code, Reason: raw.Reason, Message: raw.Message}
	if len(raw.Details) == 0 || json.Unmarshal(raw.Details, &st.Details) == nil {
		return st
	}
	var kube struct {
		Causes []struct{ Field, Message string } `json:"causes"`
	}
	if json.Unmarshal(raw.Details, &kube) == nil {
		for _, c := range kube.Causes {
			st.Details = append(st.Details, v1alpha1.FieldError{Field: strings.TrimPrefix(c.Field, "."), Message: c.Message})
		}
	}
	return st
}
