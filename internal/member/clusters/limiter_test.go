package clusters

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// A token paid before a request is not paid again by the client's own
// wait for that request; the next request of the same context waits as
// usual.
func TestPrepaidLimiter(t *testing.T) {
	l := newPrepaidLimiter(&rest.Config{QPS: 1, Burst: 1})
	ctx := t.Context()
	if err := l.waitPrepaid(ctx); err != nil { // the only token
		t.Fatal(err)
	}
	paid := prepay(ctx)
	start := time.Now()
	if err := l.Wait(paid); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 500*time.Millisecond {
		t.Errorf("the prepaid request waited %s for a token", waited)
	}
	// The bucket is empty: a second request waits for the next token,
	// which a short deadline does not allow.
	short, cancel := context.WithTimeout(paid, 100*time.Millisecond)
	defer cancel()
	if err := l.Wait(short); err == nil {
		t.Error("a second request of a prepaid context went without a token")
	}
	if none := newPrepaidLimiter(&rest.Config{QPS: -1}); none.Wait(ctx) != nil || !none.TryAccept() || none.QPS() != -1 {
		t.Error("a negative QPS should mean no limit")
	}
}
