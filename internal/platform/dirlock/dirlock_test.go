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
	if !Held(dir, "up") {
		t.Fatal("Held: false while held")
	}
	l.Release()
	if Held(dir, "up") || Held(t.TempDir(), "up") {
		t.Fatal("Held: true after the release, or of a folder never locked")
	}
	l2, err := Acquire(dir, "up")
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	l2.Release()
}
