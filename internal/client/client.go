// Package client is the HTTP client of purser's REST API that the command
// line uses. It finds the server and token from flags, the environment
// (PURSER_SERVER, PURSER_TOKEN) or the client config that `purser up`
// writes, and turns the API's error bodies back into errors that read as
// the server wrote them.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
)

// Config is where the server is and who we are.
type Config struct {
	Server string `json:"server"`
	Token  string `json:"token"`
	// AuditKey is the public key that signs the server's audit anchors
	// (ed25519:...), which `purser history --verify` checks the newest
	// anchor with.
	AuditKey string `json:"auditKey,omitempty"`
}

// DefaultConfigPath is the client config `purser up` writes.
func DefaultConfigPath() (string, error) {
	if p := os.Getenv("PURSER_CONFIG"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "purser", "config.yaml"), nil
}

// WriteConfig saves a client config readable by its owner only.
func WriteConfig(path string, c Config) error {
	data, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Resolve fills what flags left empty from the environment, then from the
// client config file.
func Resolve(flags Config) (Config, error) {
	c := flags
	if c.Server == "" {
		c.Server = os.Getenv("PURSER_SERVER")
	}
	if c.Token == "" {
		c.Token = os.Getenv("PURSER_TOKEN")
	}
	if c.AuditKey == "" {
		c.AuditKey = os.Getenv("PURSER_AUDIT_KEY")
	}
	if c.Server == "" || c.Token == "" {
		path, err := DefaultConfigPath()
		if err == nil {
			if data, err := os.ReadFile(path); err == nil {
				var file Config
				if err := yaml.Unmarshal(data, &file); err != nil {
					return c, fmt.Errorf("client config %s: %w", path, err)
				}
				if c.Server == "" {
					c.Server = file.Server
				}
				if c.Token == "" {
					c.Token = file.Token
				}
				if c.AuditKey == "" && c.Server == file.Server {
					c.AuditKey = file.AuditKey
				}
			}
		}
	}
	if c.Server == "" {
		return c, errors.New("no purser server: pass --server URL, set PURSER_SERVER, or run `purser up` on this machine")
	}
	if c.Token == "" {
		return c, errors.New("no token: pass --token, set PURSER_TOKEN, run purser login, or run `purser up` on this machine")
	}
	return c, nil
}

// ResolveWithLogin is Resolve where a login cached for the server (purser
// login) comes before the client config's token: a user who signed in
// means to act as themselves, not as the admin `purser up` wrote down. The
// login's ID token is refreshed when it expired.
func ResolveWithLogin(ctx context.Context, flags Config) (Config, error) {
	explicit := flags.Token
	if explicit == "" {
		explicit = os.Getenv("PURSER_TOKEN")
	}
	// The server (and audit key) as Resolve finds them, whatever the
	// token: a stand-in keeps it from asking for one.
	c, err := Resolve(Config{Server: flags.Server, Token: "stand-in", AuditKey: flags.AuditKey})
	if err != nil {
		return c, err
	}
	c.Token = explicit
	if c.Token == "" {
		l, err := LoadLogin(c.Server)
		if err != nil {
			return c, err
		}
		if l != nil {
			if c.Token, err = l.Token(ctx); err != nil {
				return c, err
			}
			return c, nil
		}
	}
	return Resolve(flags)
}

// Client talks to one purser server.
type Client struct {
	cfg  Config
	http *http.Client
}

// New returns a client for a resolved config.
func New(cfg Config) *Client {
	return &Client{cfg: cfg, http: &http.Client{Timeout: 60 * time.Second}}
}

// Config is the configuration the client was made with.
func (c *Client) Config() Config { return c.cfg }

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
		return 0, fmt.Errorf("purser server at %s: %w", c.cfg.Server, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 400 {
		apiErr := &v1alpha1.Status{}
		if json.Unmarshal(data, apiErr) != nil || apiErr.Message == "" {
			return resp.StatusCode, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(data)))
		}
		return resp.StatusCode, apiErr
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode answer of %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}
