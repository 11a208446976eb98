package farm

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Namespace is an anonymous network namespace: one data center of a DC
// farm. It is created by unshare(2) on a thread of its own and never
// named (no /var/run/netns entry), so that nothing outlives the test: the
// kernel removes it with the last process in it and the last file that
// refers to it, which Pdeathsig and the end of the test binary guarantee.
// A failed run, even one killed with SIGKILL, therefore leaves no
// namespace, interface or route behind to clean up.
//
// Every process of the DC is forked from the namespace's thread (a child
// inherits the network namespace of the thread that forks it); the test
// reaches into the namespace with Dial and Listen.
type Namespace struct {
	Name string
	sp   *spawner
	fd   int // an open handle on the namespace, for setns(2)
}

// rootNetns is a handle on the test's own network namespace, to which a
// thread returns after dialling inside a DC.
// An ordinary goroutine never runs on a spawner's thread (those stay
// locked), so the thread that opens it is in the test's namespace.
var rootNetns = sync.OnceValues(func() (int, error) {
	return unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
})

// newNamespace creates an empty network namespace (only a loopback
// interface, down) with a spawner thread inside it.
func newNamespace(name string) (*Namespace, error) {
	if _, err := rootNetns(); err != nil {
		return nil, fmt.Errorf("netns: handle on the test's namespace: %w", err)
	}
	ns := &Namespace{Name: name, fd: -1}
	var setupErr error
	ns.sp = newSpawnerWith(func() {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			setupErr = fmt.Errorf("netns %s: unshare: %w (the DC farm needs root)", name, err)
			return
		}
		ns.fd, setupErr = unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	})
	if setupErr != nil {
		ns.sp.close()
		return nil, setupErr
	}
	return ns, nil
}

// Run runs a command inside the namespace and returns its combined
// output.
func (ns *Namespace) Run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out []byte
	var err error
	ns.sp.do(func() { out, err = cmd.CombinedOutput() })
	if err != nil {
		return string(out), fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), ns.Name, err, out)
	}
	return string(out), nil
}

// inside runs f on a thread that has joined the namespace, and returns
// the thread to the test's namespace afterwards. A socket keeps the
// namespace it was created in, so a connection or listener made by f
// works from any goroutine later.
func (ns *Namespace) inside(f func()) error {
	root, err := rootNetns()
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(ns.fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("netns %s: setns: %w", ns.Name, err)
			return
		}
		f()
		// Back in the test's namespace, the thread may serve other
		// goroutines again; if it cannot go back, it ends with this
		// goroutine (a locked thread is discarded), never to run
		// anything else inside the DC by mistake.
		if unix.Setns(root, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- nil
	}()
	return <-done
}

// Dial connects from inside the namespace, as a process of the DC would.
func (ns *Namespace) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	var dialErr error
	if err := ns.inside(func() {
		var d net.Dialer
		conn, dialErr = d.DialContext(ctx, network, addr)
	}); err != nil {
		return nil, err
	}
	return conn, dialErr
}

// Listen listens inside the namespace.
func (ns *Namespace) Listen(network, addr string) (net.Listener, error) {
	var ln net.Listener
	var listenErr error
	// Binding does not wait on anything a context could cancel.
	var lc net.ListenConfig
	if err := ns.inside(func() { ln, listenErr = lc.Listen(context.Background(), network, addr) }); err != nil {
		return nil, err
	}
	return ln, listenErr
}

// openTUN creates a TUN interface (IP packets, no header) inside the
// namespace and returns its file: what the kernel of the namespace routes
// to the interface is read from it, and what is written to it arrives as
// if from the wire. It disappears when the file is closed.
func (ns *Namespace) openTUN(name string) (*os.File, error) {
	var f *os.File
	var tunErr error
	ns.sp.do(func() {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			tunErr = fmt.Errorf("open /dev/net/tun: %w", err)
			return
		}
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			_ = unix.Close(fd) // never handed out
			tunErr = err
			return
		}
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			_ = unix.Close(fd) // never handed out
			tunErr = fmt.Errorf("TUNSETIFF %s: %w", name, err)
			return
		}
		// Non-blocking, so that the runtime's poller serves reads and a
		// Close ends a read in progress.
		if err := unix.SetNonblock(fd, true); err != nil {
			_ = unix.Close(fd) // never handed out
			tunErr = err
			return
		}
		f = os.NewFile(uintptr(fd), name)
	})
	if tunErr != nil {
		return nil, fmt.Errorf("netns %s: %w", ns.Name, tunErr)
	}
	return f, nil
}

// close ends the namespace's thread and drops the handle; the namespace
// goes once its processes have exited.
func (ns *Namespace) close() {
	if ns.fd >= 0 {
		_ = unix.Close(ns.fd) // a handle only read from: nothing is lost
		ns.fd = -1
	}
	ns.sp.close()
}
