package dirlock

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestOneHolderAtATime(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir, "up")
	if err != nil {
		t.Fatal(err)
	}
	if HolderPid(dir, "up") != os.Getpid() {
		t.Fatalf("holder pid %d, want ours", HolderPid(dir, "up"))
	}
	// flock locks are per open file description: a second Acquire, even in
	// this process, is refused like another process would be.
	if _, err := Acquire(dir, "up"); !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("second Acquire: %v, want ErrHeld naming the pid", err)
	}
	l.Release()
	l2, err := Acquire(dir, "up")
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	l2.Release()
}
