package reconcile

import (
	"context"
	"errors"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// jitterFactor lengthens each period and backoff by up to a fifth, so
// that replicas, clusters or keys that started or failed together drift
// apart.
const jitterFactor = 0.2

// Every runs fn at once and then every period, jittered, the period
// counted from the end of each run, until ctx is done. It is the one
// shape of purser's periodic work (heartbeats, snapshots, polls, probes).
func Every(ctx context.Context, period time.Duration, fn func(ctx context.Context)) {
	wait.JitterUntilWithContext(ctx, fn, period, jitterFactor, true)
}

// Period runs fn at once and then every period, counted from the start
// of each run and not jittered, until ctx is done: for a beat whose
// timing another party counts on (a lease renewed every period, which a
// slow run must not push back), where Every would lengthen the gap.
func Period(ctx context.Context, period time.Duration, fn func(ctx context.Context)) {
	wait.NonSlidingUntilWithContext(ctx, fn, period)
}

// Backoff is purser's exponential backoff: base, doubled at each retry up
// to ceiling, each wait lengthened by up to a fifth; it never runs out.
func Backoff(base, ceiling time.Duration) wait.Backoff {
	return wait.Backoff{Duration: base, Factor: 2, Jitter: jitterFactor, Steps: math.MaxInt32, Cap: ceiling}
}

// Contention is the backoff between the tries of work that collided with
// another writer (a transaction, a conditional update): base, doubled at
// each try, each wait lengthened by up to as much again, so that writers
// that collided do not collide again in step. The caller bounds the tries
// (Tries).
func Contention(base time.Duration) wait.Backoff {
	return wait.Backoff{Duration: base, Factor: 2, Jitter: 1, Steps: math.MaxInt32}
}

// Tries runs fn under Retry at most n times while again says its error
// is worth another try, and returns fn's last error as fn returned it
// (never wrapped: callers compare it), or ctx's error when ctx ended
// before fn ran.
func Tries(ctx context.Context, b wait.Backoff, n int, again func(error) bool, fn func(ctx context.Context) error) error {
	var err error
	ran := false
	_ = Retry(ctx, b, func(ctx context.Context, attempt int) error {
		err, ran = fn(ctx), true
		if err == nil || attempt >= n-1 || !again(err) {
			return Terminal(err)
		}
		return err
	})
	if !ran {
		return ctx.Err()
	}
	return err
}

// Poll runs fn at once and then every period, counted from the end of
// each run, until fn reports done or an error, or ctx is done (ctx's
// error). It is the one shape of a client waiting for a state: a CLI
// following a watch or a move, a start-up waiting for its server.
func Poll(ctx context.Context, period time.Duration, fn func(ctx context.Context) (done bool, err error)) error {
	return wait.PollUntilContextCancel(ctx, period, true, fn)
}

// Retry runs fn until it returns nil, an error marked Terminal (which it
// returns), or ctx is done (the last error, or ctx's when
// there was none), waiting by b between tries. attempt counts from 0.
func Retry(ctx context.Context, b wait.Backoff, fn func(ctx context.Context, attempt int) error) error {
	var last error
	attempt := 0
	err := b.DelayFunc().Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		last = fn(ctx, attempt)
		attempt++
		if last == nil {
			return true, nil
		}
		if IsTerminal(last) {
			return false, last
		}
		return false, nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		if last != nil {
			return last
		}
		return err
	default:
		return err
	}
}

// Sleep waits d, or until ctx is done; it reports whether d passed. It
// is for a wait inside one step (a spacing between two publications), not
// for a loop: loops are a Queue, Every or Retry.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
