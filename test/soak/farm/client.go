package farm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// ErrGaveUp is returned when a call met only connection errors and
// retryable answers for longer than the client's MaxWait.
var ErrGaveUp = errors.New("gave up retrying")

// Client calls the farm's API replicas the way a patient user behind a
// load balancer would: a connection error or a 502, 503 or 504 moves on to
// the next replica after a backoff, until MaxWait has passed. Any other
// answer is final.
type Client struct {
	replicas []*client.Client
	next     atomic.Uint32
	// MaxWait caps the retries of one call.
	MaxWait time.Duration
	// AttemptTimeout bounds one request.
	AttemptTimeout time.Duration

	retries atomic.Int64
}

// NewClient returns a client of the API replicas at urls.
func NewClient(urls []string, token string) *Client {
	var replicas []*client.Client
	for _, u := range urls {
		replicas = append(replicas, client.New(client.Config{Server: u, Token: token}))
	}
	return newClient(replicas...)
}

func newClient(replicas ...*client.Client) *Client {
	return &Client{MaxWait: 90 * time.Second, AttemptTimeout: 20 * time.Second, replicas: replicas}
}

// Retryable reports whether an answer (code 0: no answer) is worth
// retrying: the request may not have been served.
func Retryable(code int) bool {
	switch code {
	case 0, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// Result is the outcome of one call.
type Result struct {
	// Code is the final status code; 0 when no answer came.
	Code int
	// Attempts is how many times the request was sent: above 1, an
	// earlier one may have been served although its answer was lost.
	Attempts int
	// Err is an error answer of the API as a *v1alpha1.Status, a
	// transport error, or ErrGaveUp wrapping the last one.
	Err error
	// Replica is the index of the replica that gave the final answer (in
	// a DC farm, the DC's index).
	Replica int
}

// OK reports a 2xx answer.
func (r Result) OK() bool { return r.Code/100 == 2 }

// Do sends a JSON request (body nil for none) and decodes a 2xx answer
// into out; see Call.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body, out any) (int, error) {
	r := c.Call(ctx, method, path, query, body, out)
	return r.Code, r.Err
}

// Call sends a JSON request (body nil for none), retrying as the type
// says, and decodes a 2xx answer into out.
func (c *Client) Call(ctx context.Context, method, path string, query url.Values, body, out any) Result {
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return Result{Err: err}
		}
	}
	deadline := time.Now().Add(c.MaxWait)
	var r Result
	err := reconcile.Retry(ctx, reconcile.Backoff(100*time.Millisecond, 2*time.Second), func(ctx context.Context, attempt int) error {
		idx := int(c.next.Add(1)) % len(c.replicas)
		actx, cancel := context.WithTimeout(ctx, c.AttemptTimeout)
		code, err := c.replicas[idx].Do(actx, method, path, query, data, "application/json", out)
		cancel()
		r = Result{Code: code, Attempts: attempt + 1, Err: err, Replica: idx}
		if ctx.Err() != nil {
			r.Err = ctx.Err()
			return reconcile.Terminal(r.Err)
		}
		if !Retryable(code) {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("HTTP %d", code)
		}
		if time.Now().After(deadline) {
			r.Err = fmt.Errorf("%s %s: %w after %s: %w", method, path, ErrGaveUp, c.MaxWait, err)
			return reconcile.Terminal(r.Err)
		}
		c.retries.Add(1)
		return err
	})
	if err != nil && !reconcile.IsTerminal(err) {
		// ctx ended during the wait before the next attempt.
		r.Err = ctx.Err()
	}
	return r
}

// Retries is how many requests were sent again.
func (c *Client) Retries() int64 { return c.retries.Load() }
