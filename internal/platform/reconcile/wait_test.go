package reconcile

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestTries: work that collided is tried again at most n times, only
// while its error is worth it, and its own error comes back unwrapped.
func TestTries(t *testing.T) {
	collided, refused := errors.New("collided"), errors.New("refused")
	again := func(err error) bool { return errors.Is(err, collided) }
	b := Contention(time.Millisecond)
	for _, tc := range []struct {
		name  string
		errs  []error // what each try returns; the last repeats
		n     int
		tries int
		want  error
	}{
		{"first try", []error{nil}, 5, 1, nil},
		{"after collisions", []error{collided, collided, nil}, 5, 3, nil},
		{"bounded", []error{collided}, 4, 4, collided},
		{"not worth another", []error{collided, refused}, 5, 2, refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			err := Tries(context.Background(), b, tc.n, again, func(context.Context) error {
				e := tc.errs[min(tries, len(tc.errs)-1)]
				tries++
				return e
			})
			// The same error, and not wrapped: its text is its own.
			if !errors.Is(err, tc.want) || err != nil && err.Error() != tc.want.Error() || tries != tc.tries {
				t.Errorf("got %v after %d tries, want %v after %d", err, tries, tc.want, tc.tries)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	if err := Tries(ctx, b, 3, again, func(context.Context) error { ran = true; return nil }); ran && err != nil || !ran && !errors.Is(err, context.Canceled) {
		t.Errorf("a context done before the first try: ran %v, err %v", ran, err)
	}
}
