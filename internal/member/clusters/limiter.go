package clusters

import (
	"context"
	"sync/atomic"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// prepaidLimiter is a client's rate limit that a caller can pay before the
// request it is for: waitPrepaid takes the token, and the first request
// sent with the context prepay returns goes without waiting again.
type prepaidLimiter struct {
	flowcontrol.RateLimiter // nil: no limit
}

// newPrepaidLimiter is the limit client-go would build from cfg (rest's
// RESTClientForConfigAndClient, v0.37): cfg.RateLimiter when set, else a
// token bucket of QPS and Burst, 5 and 10 when unset, none when QPS is
// negative. client-go waits on it before every try of every request, with
// the request's context (Request.tryThrottleWithInfo).
func newPrepaidLimiter(cfg *rest.Config) *prepaidLimiter {
	qps, burst := cfg.QPS, cfg.Burst
	switch {
	case cfg.RateLimiter != nil:
		return &prepaidLimiter{cfg.RateLimiter}
	case qps < 0:
		return &prepaidLimiter{}
	case qps == 0:
		qps = rest.DefaultQPS
	}
	if burst == 0 {
		burst = rest.DefaultBurst
	}
	return &prepaidLimiter{flowcontrol.NewTokenBucketRateLimiter(qps, burst)}
}

type prepaidKey struct{}

// prepay marks ctx: its first request has its token already.
func prepay(ctx context.Context) context.Context {
	paid := &atomic.Bool{}
	paid.Store(true)
	return context.WithValue(ctx, prepaidKey{}, paid)
}

func (l *prepaidLimiter) waitPrepaid(ctx context.Context) error {
	if l.RateLimiter == nil {
		return nil
	}
	return l.RateLimiter.Wait(ctx)
}

// Wait is client-go's wait before each request.
func (l *prepaidLimiter) Wait(ctx context.Context) error {
	if paid, ok := ctx.Value(prepaidKey{}).(*atomic.Bool); ok && paid.CompareAndSwap(true, false) {
		return nil
	}
	return l.waitPrepaid(ctx)
}

// The rest of flowcontrol.RateLimiter, for a limiter that may be none.

func (l *prepaidLimiter) TryAccept() bool { return l.RateLimiter == nil || l.RateLimiter.TryAccept() }

func (l *prepaidLimiter) Accept() {
	if l.RateLimiter != nil {
		l.RateLimiter.Accept()
	}
}

func (l *prepaidLimiter) Stop() {
	if l.RateLimiter != nil {
		l.RateLimiter.Stop()
	}
}

func (l *prepaidLimiter) QPS() float32 {
	if l.RateLimiter == nil {
		return -1
	}
	return l.RateLimiter.QPS()
}
