package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// process is one running sandbox program. Its output goes to a log file in
// the cluster's folder and its pid to a pid file, so that `purser sandbox
// down` can find it from another process.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	pidPath string
	done    chan struct{} // closed when the process has exited
	err     error         // its exit status, once done is closed
	// asked is set when we stop the process, so that an exit nobody asked
	// for (a kill by hand, a crash) can be told apart.
	asked atomic.Bool
}

// forker starts every sandbox program from one OS thread that is never
// released. Pdeathsig fires when the thread that forked a child ends, not
// only the process: forked from an ordinary goroutine, a kube-apiserver
// died whenever the runtime ended that goroutine's thread, which it does
// to a thread another goroutine locked and left locked (as a test that
// enters network namespaces does).
var forker = sync.OnceValue(func() chan<- func() {
	reqs := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the process
		for f := range reqs {
			f()
		}
	}()
	return reqs
})

// startOnForker runs cmd.Start on the forker's thread.
func startOnForker(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	forker() <- func() { done <- cmd.Start() }
	return <-done
}

// startProcess starts bin in its own process group. Pdeathsig makes the
// kernel kill it if the process that started it dies, so that a crashed
// test or a killed `purser sandbox up` leaves nothing behind.
func startProcess(name, dir, bin string, args, env []string) (*process, error) {
	logDir := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	p := &process{
		name:    name,
		logPath: filepath.Join(logDir, name+".log"),
		pidPath: filepath.Join(dir, "pids", name+".pid"),
		done:    make(chan struct{}),
	}
	if err := os.MkdirAll(filepath.Dir(p.pidPath), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logFile, "\n==== %s: %s %s\n", time.Now().Format(time.RFC3339), bin, strings.Join(args, " "))

	// The program outlives the call that starts it, and stop, not a
	// context, ends it: SIGTERM to its group, then SIGKILL.
	p.cmd = exec.CommandContext(context.Background(), bin, args...)
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout = logFile
	p.cmd.Stderr = logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := startOnForker(p.cmd); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := os.WriteFile(p.pidPath, []byte(strconv.Itoa(p.cmd.Process.Pid)+"\n"), 0o644); err != nil {
		// Without its pid file `sandbox down` could not find it: it goes,
		// and whoever waits for it reports the exit with this log.
		fmt.Fprintf(logFile, "==== %s: no pid file (%v): killed\n", time.Now().Format(time.RFC3339), err)
		_ = p.cmd.Process.Kill()
	}
	go func() {
		p.err = p.cmd.Wait()
		fmt.Fprintf(logFile, "==== %s: exited: %v\n", time.Now().Format(time.RFC3339), p.cmd.ProcessState)
		logFile.Close()
		_ = os.Remove(p.pidPath) // none when it could not be written
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, waits up to grace, then sends
// SIGKILL and waits for the exit.
func (p *process) stop(grace time.Duration) {
	p.asked.Store(true)
	if p.exited() {
		return
	}
	// A signal to a group that is gone already fails with ESRCH, which
	// is what stop wants anyway: the kills' errors are not checked.
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Anything the program itself started in its group goes too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// failure describes why a process is not serving: its exit, if it exited,
// and the end of its log.
func (p *process) failure() string {
	status := "is running"
	if p.exited() {
		status = fmt.Sprintf("exited (%v)", p.err)
	}
	data, _ := os.ReadFile(p.logPath)
	return fmt.Sprintf("%s %s; last lines of %s:\n%s", p.name, status, p.logPath, lastLines(string(data), 15))
}

// waitUntil polls check every 100 ms until it succeeds, ctx ends, timeout
// passes or one of the watched processes exits; the error then says why.
func waitUntil(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error, watched ...*process) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		for _, p := range watched {
			if p.exited() {
				return fmt.Errorf("waiting for %s: %s", what, p.failure())
			}
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("waiting for %s: %v (last check: %v)", what, ctx.Err(), last)
			for _, p := range watched {
				msg += "\n" + p.failure()
			}
			return errors.New(msg)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// portFree reports an error while something still listens on the port, as
// a stopped kube-apiserver's socket can for a while.
func portFree(ctx context.Context, port int) error {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	return l.Close()
}
