package reconcile

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// run starts q and returns a stop that waits for Run to return.
func run[K comparable](t *testing.T, q *Queue[K]) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
	}
	t.Cleanup(stop)
	return stop
}

// waitFor waits for c to reach n, or fails the test.
func waitFor(t *testing.T, what string, c *atomic.Int32, n int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d, want at least %d", what, c.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type outcome struct {
	err   error
	again time.Duration
}

func TestOutcomes(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		results   []error // per call; the last repeats
		requeue   time.Duration
		wantCalls int32
		wantAgain bool // the first outcome asks to run again
	}{
		{name: "success runs once", results: []error{nil}, wantCalls: 1},
		{name: "transient failures are retried until success", results: []error{boom, boom, nil}, wantCalls: 3, wantAgain: true},
		{name: "a terminal error is not retried", results: []error{Terminal(boom)}, wantCalls: 1},
		{name: "a wrapped terminal error is not retried", results: []error{errors.Join(errors.New("ctx"), Terminal(boom))}, wantCalls: 1},
		{name: "RequeueAfter runs the key again", results: []error{nil}, requeue: 20 * time.Millisecond, wantCalls: 3, wantAgain: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			var mu sync.Mutex
			var outcomes []outcome
			q := New(func(ctx context.Context, key string) (Result, error) {
				n := int(calls.Add(1))
				err := tc.results[min(n, len(tc.results))-1]
				return Result{RequeueAfter: tc.requeue}, err
			}, Config[string]{RetryBase: time.Millisecond, RetryMax: 10 * time.Millisecond,
				Done: func(key string, err error, again time.Duration) {
					mu.Lock()
					outcomes = append(outcomes, outcome{err, again})
					mu.Unlock()
				}})
			stop := run(t, q)
			q.Add("k")
			waitFor(t, "calls", &calls, tc.wantCalls)
			// Give a wrong extra call the time to happen: the key's
			// retries are milliseconds apart, so 100 ms is many of them.
			time.Sleep(100 * time.Millisecond)
			stop()
			if tc.requeue == 0 && calls.Load() != tc.wantCalls {
				t.Errorf("calls = %d, want %d", calls.Load(), tc.wantCalls)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(outcomes) == 0 {
				t.Fatal("Done was never called")
			}
			if got := outcomes[0].again > 0; got != tc.wantAgain {
				t.Errorf("first outcome %+v: runs again = %v, want %v", outcomes[0], got, tc.wantAgain)
			}
		})
	}
}

// A key added while it is being reconciled is reconciled again after,
// never by two workers at once.
func TestOneWorkerPerKey(t *testing.T) {
	var running, overlap, calls atomic.Int32
	release := make(chan struct{})
	q := New(func(ctx context.Context, key string) (Result, error) {
		if running.Add(1) > 1 {
			overlap.Add(1)
		}
		defer running.Add(-1)
		if calls.Add(1) == 1 {
			<-release
		}
		return Result{}, nil
	}, Config[string]{Workers: 4})
	run(t, q)
	q.Add("k")
	waitFor(t, "calls", &calls, 1)
	q.Add("k")
	q.Add("k")
	time.Sleep(50 * time.Millisecond)
	if calls.Load() != 1 {
		t.Fatalf("the key ran again while it was running: %d calls", calls.Load())
	}
	close(release)
	waitFor(t, "calls", &calls, 2)
	if overlap.Load() != 0 {
		t.Errorf("two workers held the key at once %d times", overlap.Load())
	}
}

type gate struct{ err atomic.Pointer[error] }

func (g *gate) Err() error {
	if p := g.err.Load(); p != nil {
		return *p
	}
	return nil
}

// A closed gate holds every key; once it opens, the keys run.
func TestGateHoldsKeys(t *testing.T) {
	var calls, held atomic.Int32
	g := &gate{}
	closed := errors.New("no primary")
	g.err.Store(&closed)
	q := New(func(ctx context.Context, key string) (Result, error) {
		calls.Add(1)
		return Result{}, nil
	}, Config[string]{Gate: g, RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond,
		Done: func(key string, err error, again time.Duration) {
			if errors.Is(err, closed) {
				held.Add(1)
			}
		}})
	run(t, q)
	q.Add("k")
	waitFor(t, "keys held by the gate", &held, 3)
	if calls.Load() != 0 {
		t.Fatalf("the key was reconciled through a closed gate")
	}
	g.err.Store(nil)
	waitFor(t, "calls", &calls, 1)
}

// The resync queues every listed key, but leaves a key waiting for its
// retry to its backoff.
func TestResync(t *testing.T) {
	var a, b atomic.Int32
	q := New(func(ctx context.Context, key string) (Result, error) {
		if key == "a" {
			a.Add(1)
			return Result{}, nil
		}
		b.Add(1)
		return Result{}, errors.New("b fails")
	}, Config[string]{
		Resync:       func(ctx context.Context) ([]string, error) { return []string{"a", "b"}, nil },
		ResyncPeriod: 10 * time.Millisecond,
		RetryBase:    time.Hour, RetryMax: time.Hour,
	})
	run(t, q)
	waitFor(t, "resyncs of a", &a, 5)
	if n := b.Load(); n != 1 {
		t.Errorf("b, in backoff for an hour, ran %d times; want once", n)
	}
}

// RetryAfter holds the retry at least that long, beyond a short backoff.
func TestRetryAfter(t *testing.T) {
	var calls atomic.Int32
	var mu sync.Mutex
	var first, second time.Time
	q := New(func(ctx context.Context, key string) (Result, error) {
		mu.Lock()
		defer mu.Unlock()
		switch calls.Add(1) {
		case 1:
			first = time.Now()
			return Result{}, RetryAfter(errors.New("busy"), 200*time.Millisecond)
		case 2:
			second = time.Now()
		}
		return Result{}, nil
	}, Config[string]{RetryBase: time.Millisecond, RetryMax: time.Millisecond})
	run(t, q)
	q.Add("k")
	waitFor(t, "calls", &calls, 2)
	mu.Lock()
	defer mu.Unlock()
	if d := second.Sub(first); d < 200*time.Millisecond {
		t.Errorf("retried after %v, want at least 200ms", d)
	}
}

// A panic ends the key as a terminal failure, and the worker lives on.
func TestPanicIsTerminal(t *testing.T) {
	var calls atomic.Int32
	var terminal atomic.Bool
	q := New(func(ctx context.Context, key string) (Result, error) {
		calls.Add(1)
		if key == "bad" {
			panic("bad key")
		}
		return Result{}, nil
	}, Config[string]{Done: func(key string, err error, again time.Duration) {
		if key == "bad" && IsTerminal(err) && again == 0 {
			terminal.Store(true)
		}
	}})
	run(t, q)
	q.Add("bad")
	q.Add("good")
	waitFor(t, "calls", &calls, 2)
	if !terminal.Load() {
		t.Error("the panic was not a terminal failure")
	}
}

// Run returns once its context ends, after the reconcile under way.
func TestRunWaitsForReconciles(t *testing.T) {
	var started, finished atomic.Int32
	q := New(func(ctx context.Context, key string) (Result, error) {
		started.Add(1)
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond)
		finished.Add(1)
		return Result{}, ctx.Err()
	}, Config[string]{})
	stop := run(t, q)
	q.Add("k")
	waitFor(t, "started", &started, 1)
	stop()
	if finished.Load() != 1 {
		t.Error("Run returned before the reconcile under way ended")
	}
}

func TestRetry(t *testing.T) {
	boom := errors.New("boom")
	b := Backoff(time.Millisecond, 2*time.Millisecond)
	calls := 0
	err := Retry(context.Background(), b, func(ctx context.Context, attempt int) error {
		if attempt != calls {
			t.Errorf("attempt %d on call %d", attempt, calls)
		}
		calls++
		if calls < 4 {
			return boom
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Errorf("Retry = %v after %d calls, want nil after 4", err, calls)
	}

	calls = 0
	err = Retry(context.Background(), b, func(ctx context.Context, attempt int) error {
		calls++
		return Terminal(boom)
	})
	if !errors.Is(err, boom) || calls != 1 {
		t.Errorf("Retry = %v after %d calls, want boom after 1", err, calls)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	err = Retry(ctx, b, func(ctx context.Context, attempt int) error { return boom })
	if !errors.Is(err, boom) {
		t.Errorf("Retry after its context ended = %v, want the last error", err)
	}
}

// Backoff doubles up to its cap and never runs out.
func TestBackoff(t *testing.T) {
	b := Backoff(10*time.Millisecond, 40*time.Millisecond)
	delay := b.DelayFunc()
	for i, want := range []time.Duration{10, 20, 40, 40, 40, 40} {
		want *= time.Millisecond
		got := delay()
		if got < want || got > want+want/5 {
			t.Errorf("wait %d = %v, want %v and up to a fifth more", i, got, want)
		}
	}
}

func TestEvery(t *testing.T) {
	var n atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, 5*time.Millisecond, func(context.Context) { n.Add(1) })
	}()
	waitFor(t, "runs", &n, 3)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Every did not return after its context ended")
	}
}
