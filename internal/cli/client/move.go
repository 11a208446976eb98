package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

var runnables = Resources[0]

// Move asks a planned move of runnable ns/name to cluster to ("":
// placement chooses) and returns the runnable as the API answered.
func (c *Client) Move(ctx context.Context, ns, name, to string) (*v1alpha1.Runnable, error) {
	body, err := json.Marshal(v1alpha1.MoveRequest{To: to})
	if err != nil {
		return nil, err
	}
	var out v1alpha1.Runnable
	if _, err := c.Do(ctx, http.MethodPost, runnables.Path(ns, name)+"/move", nil, body, "application/json", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WaitMoved polls runnable ns/name every interval until the planned move
// asked at asked (status.move.at as Move's answer gave it) or a later one
// has ended, Done or Failed, and returns it;
// progress, when set, is called with each new message.
func (c *Client) WaitMoved(ctx context.Context, ns, name string, asked time.Time, interval time.Duration, progress func(string)) (*v1alpha1.Runnable, error) {
	last := ""
	var r v1alpha1.Runnable
	var failed error
	err := reconcile.Poll(ctx, interval, func(ctx context.Context) (bool, error) {
		r = v1alpha1.Runnable{}
		if _, err := c.Do(ctx, http.MethodGet, runnables.Path(ns, name), nil, nil, "", &r); err != nil {
			failed = err
			return false, err
		}
		if m := r.Status.Move; m != nil && !m.At.Before(asked) && !m.Active() {
			return true, nil
		}
		if progress != nil && r.Status.Message != last {
			last = r.Status.Message
			progress(last)
		}
		return false, nil
	})
	switch {
	case failed != nil:
		return nil, failed
	case err != nil:
		step := "not started"
		if m := r.Status.Move; m != nil {
			step = m.Step
		}
		return &r, fmt.Errorf("runnable %s/%s: the move did not end in time (step %s): %s", ns, name, step, r.Status.Message)
	}
	return &r, nil
}
