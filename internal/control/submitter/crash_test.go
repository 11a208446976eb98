package submitter_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// The helper process of TestCrashSafety reads its wiring from these.
const (
	helperEnv    = "PURSER_SUBMITTER_HELPER"
	helperDSN    = "PURSER_SUBMITTER_HELPER_DSN"
	helperNATS   = "PURSER_SUBMITTER_HELPER_NATS"
	helperSealer = "PURSER_SUBMITTER_HELPER_KEY"
)

// TestSubmitterProcess is not a test: it is the submitter process that
// TestCrashSafety starts and kills with SIGKILL, so that a crash is a real
// crash (no deferred cleanup, held messages never settled, transactions
// cut off) rather than a cancelled context.
func TestSubmitterProcess(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("helper process of TestCrashSafety")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	key, err := hex.DecodeString(os.Getenv(helperSealer))
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, os.Getenv(helperDSN))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	streams, err := stream.Connect(ctx, os.Getenv(helperNATS), stream.Config{Name: "submitter-helper"})
	if err != nil {
		t.Fatal(err)
	}
	defer streams.Close()
	s := submitter.New(submitter.Config{
		Store: db, Sealer: sealer, Stream: streams, RescanInterval: time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCrashSafety submits 300 runnables, each announced twice, while two
// submitter processes run and one of them is killed (SIGKILL) and started
// again every second and a half. At the end every runnable is Submitted,
// created exactly once on exactly one cluster, with one attempt.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	dir := t.TempDir()
	dsn := dir + "/purser.db"
	f := newFixture(t, dsn)
	f.registerShared()
	natsURL := f.natsURL

	start := func() *exec.Cmd {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSubmitterProcess$", "-test.v")
		cmd.Env = append(os.Environ(), helperEnv+"=1", helperDSN+"="+dsn, helperNATS+"="+natsURL,
			helperSealer+"="+hex.EncodeToString(f.key))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	kill := func(cmd *exec.Cmd) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	steady := start()
	victim := start()
	t.Cleanup(func() { kill(steady); kill(victim) })

	const n = 300
	names := make([]string, n)
	ctx, cancel := context.WithCancel(context.Background())
	killed := make(chan int)
	go func() {
		kills := 0
		defer func() { killed <- kills }()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(1500 * time.Millisecond):
			}
			kill(victim)
			victim = start()
			kills++
		}
	}()
	for i := range n {
		names[i] = fmt.Sprintf("c-%03d", i)
		f.submit(names[i], runnableSpec{template: job(true)})
		rec, _, _ := f.get(names[i])
		f.publish(rec, stream.SubmissionSubmit, "/redelivered")
		if i%50 == 49 {
			time.Sleep(time.Second) // spread the submissions over several kills
		}
	}
	sandboxtest.Eventually(t, wait, "every runnable Submitted", func(context.Context) error {
		left := 0
		for _, name := range names {
			if rec, _, _ := f.get(name); rec.Phase != string(v1alpha1.PhaseSubmitted) {
				left++
			}
		}
		if left > 0 {
			return fmt.Errorf("%d runnables not Submitted yet", left)
		}
		return nil
	})
	cancel()
	t.Logf("the victim submitter was killed %d times", <-killed)
	// Anything in flight lands before counting: every message settled, those
	// the killed processes held included (redelivered after the ack wait).
	f.consumed()
	for _, name := range names {
		rec, _, attempts := f.get(name)
		if len(attempts) != 1 || attempts[0].ObjectUID == "" {
			t.Errorf("%s: attempts %+v", name, attempts)
		}
		total := 0
		for cluster := range f.dyn {
			total += len(f.objects(cluster, jobs, rec.UID))
		}
		if total != 1 {
			t.Errorf("%s: created %d times", name, total)
		}
	}
}
