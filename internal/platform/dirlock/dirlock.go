// Package dirlock makes a data folder belong to one process at a time, so
// that two `purser up` (or two sandboxes) never share a database, a
// stream store or a cluster's files. The lock is an flock, which the
// kernel releases when its holder dies, so a crash never leaves it stuck.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrHeld is returned when another process holds the folder.
var ErrHeld = errors.New("folder in use")

// Lock is a held folder.
type Lock struct {
	f       *os.File
	pidPath string
}

// Acquire takes dir/<name>.lock without waiting and records our pid in
// dir/<name>.pid. When another process holds it, the error wraps ErrHeld
// and names that process.
func Acquire(dir, name string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, name+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	pidPath := filepath.Join(dir, name+".pid")
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s is used by pid %d: %w", dir, HolderPid(dir, name), ErrHeld)
	}
	if err := os.WriteFile(pidPath, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		f.Close()
		return nil, err
	}
	return &Lock{f: f, pidPath: pidPath}, nil
}

// HolderPid is the pid recorded by the holder of dir/<name>.lock, or 0.
func HolderPid(dir, name string) int {
	data, err := os.ReadFile(filepath.Join(dir, name+".pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// Release gives the folder back.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	// The pid file goes while the lock is still held, so that it is never
	// the next holder's; one left behind (the folder is read-only, say) is
	// overwritten by the next Acquire. Closing the file releases the lock.
	_ = os.Remove(l.pidPath)
	l.f.Close()
	l.f = nil
}

// Held reports whether a live process holds dir/<name>.lock, without
// taking it: a lock file nobody holds (its holder died) or none at all
// is not held.
func Held(dir, name string) bool {
	f, err := os.Open(filepath.Join(dir, name+".lock"))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
