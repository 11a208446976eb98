// Package backoff is how purser's loops wait: between retries of
// something that failed, and between runs of periodic work, always with
// jitter so that many replicas, clusters or runnables that failed together
// do not retry in step, and always giving up the wait when the context
// ends.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Exponential is the wait before retry number attempt (0 first): base
// doubled each time, capped at max, jittered over its upper half.
func Exponential(attempt int, base, max time.Duration) time.Duration {
	d := base << min(attempt, 30)
	if d <= 0 || d > max {
		d = max
	}
	return d/2 + rand.N(d/2+1)
}

// Jitter lengthens d by up to a fifth, to spread periodic work.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d + rand.N(d/5+1)
}

// Sleep waits d, or until ctx is done; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
