package farm

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/purser-io/purser/internal/platform/reconcile"
)

// spawner starts every process of a farm from one OS thread that lives as
// long as the farm. Pdeathsig fires when the thread that forked a child
// ends, not the process: a child started from an ordinary goroutine could
// be killed whenever the Go runtime retires that goroutine's thread. When
// the farm closes, the spawner's goroutine returns while still locked to
// its thread, the runtime ends the thread, and the kernel kills anything
// the farm failed to stop.
type spawner struct {
	reqs chan func()
	done chan struct{}
}

func newSpawner() *spawner { return newSpawnerWith(nil) }

// newSpawnerWith runs setup on the spawner's thread before anything else
// (to move the thread into a network namespace, say), and returns once it
// has run.
func newSpawnerWith(setup func()) *spawner {
	s := &spawner{reqs: make(chan func()), done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: see the type's comment
		defer close(s.done)
		if setup != nil {
			setup()
		}
		close(ready)
		for f := range s.reqs {
			f()
		}
	}()
	<-ready
	return s
}

// do runs f on the spawner's thread and waits for it.
func (s *spawner) do(f func()) {
	ran := make(chan struct{})
	s.reqs <- func() { f(); close(ran) }
	<-ran
}

func (s *spawner) close() {
	close(s.reqs)
	<-s.done
}

// Process is one program of the farm (a purser component, an agent, a
// NATS node) run as a separate process. Its output is appended to one log
// file across restarts. While it is wanted, an exit the farm did not cause
// is a crash: it is counted, logged, and the process is started again
// after a backoff, as a kubelet would.
type Process struct {
	Name    string
	LogPath string

	bin  string
	args []string
	// workDir is where it runs (the folder of its log when empty), cred
	// the user it runs as (this one's when nil), stopSignal what Stop
	// sends first (SIGTERM when 0).
	workDir    string
	cred       *syscall.Credential
	stopSignal syscall.Signal
	sp         *spawner
	logf       func(format string, args ...any)
	ctx        context.Context // the farm's: done when the farm closes
	wg         *sync.WaitGroup // the farm's: owns the restart goroutines

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when the current run has exited
	wanted   bool          // started and not stopped on purpose
	stopping bool          // the current run is being killed or stopped by us
	starts   int
	kills    int
	crashes  []Crash
	// restartDelay spaces the restarts after crashes: each crash waits
	// longer than the one before.
	restartDelay wait.DelayFunc
}

// Crash is an exit of a wanted process that nobody asked for.
type Crash struct {
	Process string
	At      time.Time
	Status  string
	// LogTail is the end of the process's log at the time.
	LogTail string
}

// crashesOf returns every exit of procs nobody asked for, in time order.
func crashesOf(procs []*Process) []Crash {
	var out []Crash
	for _, p := range procs {
		out = append(out, p.Crashes()...)
	}
	slices.SortFunc(out, func(a, b Crash) int { return a.At.Compare(b.At) })
	return out
}

func (c Crash) String() string {
	return fmt.Sprintf("%s exited by itself at %s (%s); last lines of its log:\n%s",
		c.Process, c.At.Format("15:04:05.000"), c.Status, c.LogTail)
}

// Start starts the process; it is a no-op while it runs.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.startLocked()
}

func (p *Process) startLocked() error {
	if p.running() {
		return nil
	}
	if p.ctx.Err() != nil {
		return fmt.Errorf("start %s: the farm is closing", p.Name)
	}
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	fmt.Fprintf(logFile, "\n==== %s: %s %s\n", time.Now().Format(time.RFC3339Nano), p.bin, strings.Join(p.args, " "))
	// Stop and Kill end it, gracefully or not; the farm's context, done
	// before the farm stops its processes, only ends the restarts.
	cmd := exec.CommandContext(context.Background(), p.bin, p.args...)
	cmd.Dir = cmp.Or(p.workDir, filepath.Dir(p.LogPath))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, so that a kill reaches anything it started;
	// Pdeathsig, so that nothing outlives the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: p.cred}
	var startErr error
	p.sp.do(func() { startErr = cmd.Start() })
	if startErr != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", p.Name, startErr)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.wanted, p.stopping = cmd, done, true, false
	p.starts++
	go p.wait(cmd, done, logFile)
	return nil
}

// wait reaps one run and, when nobody asked for the exit, restarts it.
func (p *Process) wait(cmd *exec.Cmd, done chan struct{}, logFile *os.File) {
	err := cmd.Wait()
	fmt.Fprintf(logFile, "==== %s: exited: %v\n", time.Now().Format(time.RFC3339Nano), exitStatus(err))
	logFile.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	close(done)
	if p.stopping || !p.wanted || p.ctx.Err() != nil {
		return
	}
	c := Crash{Process: p.Name, At: time.Now(), Status: exitStatus(err), LogTail: tail(p.LogPath, 10)}
	p.crashes = append(p.crashes, c)
	p.logf("farm: %s", c)
	if p.restartDelay == nil {
		p.restartDelay = reconcile.Backoff(time.Second, 10*time.Second).DelayFunc()
	}
	delay := p.restartDelay()
	p.wg.Go(func() {
		if !reconcile.Sleep(p.ctx, delay) {
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.wanted || p.running() || p.ctx.Err() != nil {
			return
		}
		if err := p.startLocked(); err != nil {
			p.logf("farm: restart %s after its crash: %v", p.Name, err)
		}
	})
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// running reports whether a run is alive; p.mu is held.
func (p *Process) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Running reports whether the process is alive.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running()
}

// Kill sends SIGKILL to the process (kill -9) and waits until it is gone.
// It stays down until Start.
func (p *Process) Kill() {
	p.mu.Lock()
	if !p.running() {
		p.wanted = false
		p.mu.Unlock()
		return
	}
	p.wanted, p.stopping = false, true
	p.kills++
	pid, done := p.cmd.Process.Pid, p.done
	p.mu.Unlock()
	_ = syscall.Kill(-pid, syscall.SIGKILL) // ESRCH: gone already, as wanted
	<-done
}

// Stop asks the process to stop (SIGTERM, or its stopSignal), and kills it
// after grace.
func (p *Process) Stop(grace time.Duration) {
	p.mu.Lock()
	p.wanted = false
	if !p.running() {
		p.mu.Unlock()
		return
	}
	p.stopping = true
	pid, done := p.cmd.Process.Pid, p.done
	p.mu.Unlock()
	// A signal to a group that is gone already fails with ESRCH, which is
	// what Stop wants anyway: the kills' errors are not checked.
	if p.stopSignal != 0 {
		_ = syscall.Kill(pid, p.stopSignal) // the leader decides how its group stops
	} else {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
	}
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-done
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL) // whatever it started in its group
}

// Args are the process's arguments.
func (p *Process) Args() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.args...)
}

// SetArgs changes the arguments of the process's next start.
func (p *Process) SetArgs(args []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.args = append([]string(nil), args...)
}

// Restart kills the process and starts it again.
func (p *Process) Restart() error {
	p.Kill()
	return p.Start()
}

// Pid is the pid of the current run, 0 when it is not running.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running() {
		return 0
	}
	return p.cmd.Process.Pid
}

// Crashes returns the exits nobody asked for, oldest first.
func (p *Process) Crashes() []Crash {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Crash(nil), p.crashes...)
}

// Kills is how many times Kill found the process running.
func (p *Process) Kills() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kills
}

// Failure describes the process for an error message: whether it runs,
// and the end of its log.
func (p *Process) Failure() string {
	state := "is not running"
	if p.Running() {
		state = "is running"
	}
	return fmt.Sprintf("%s %s; last lines of %s:\n%s", p.Name, state, p.LogPath, tail(p.LogPath, 15))
}

// LoggedSinceStart reports whether the log of the current run (from the
// line its last start wrote) has a line containing one of texts: a
// process's own word that it got somewhere.
func (p *Process) LoggedSinceStart(texts ...string) bool {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return false
	}
	lines := strings.Split(string(data), "\n")
	from := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "==== ") && !strings.Contains(l, ": exited: ") {
			from = i
		}
	}
	for _, l := range lines[from:] {
		for _, t := range texts {
			if strings.Contains(l, t) {
				return true
			}
		}
	}
	return false
}

// LogSize is the length of the process's log now: where CountLogged
// starts to count what it logs from then on.
func (p *Process) LogSize() int64 {
	st, err := os.Stat(p.LogPath)
	if err != nil {
		return 0
	}
	return st.Size()
}

// CountLogged counts the lines of the log from offset (a LogSize) that
// contain one of texts.
func (p *Process) CountLogged(offset int64, texts ...string) int {
	f, err := os.Open(p.LogPath)
	if err != nil {
		return 0
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0
	}
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		for _, t := range texts {
			if strings.Contains(sc.Text(), t) {
				n++
				break
			}
		}
	}
	return n
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitFor polls check every 200 ms until it succeeds, ctx ends or timeout
// passes; watched processes that stop running end the wait early.
func waitFor(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error, watched ...*Process) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		for _, p := range watched {
			if !p.Running() && len(p.Crashes()) > 0 {
				return fmt.Errorf("waiting for %s: %s", what, p.Failure())
			}
		}
		if !reconcile.Sleep(ctx, 200*time.Millisecond) {
			msg := fmt.Sprintf("waiting for %s: %v (last check: %v)", what, ctx.Err(), last)
			for _, p := range watched {
				msg += "\n" + p.Failure()
			}
			return errors.New(msg)
		}
	}
}
