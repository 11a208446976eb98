package farm

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestStepClock: PostgreSQL started as a DC's Patroni starts it, from the
// folder steppableClock makes, keeps the true time until the DC's clock
// is stepped, then serves now() stepped, within a second and without a
// restart; its sleeps (on the monotonic clock) still take what they take.
func TestStepClock(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("PostgreSQL runs as the postgres user: needs root")
	}
	if _, err := os.Stat(Libfaketime); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("libfaketime: %v (hack/test-deps installs it)", err)
		}
		t.Skipf("libfaketime: %v; sudo bash hack/test-deps installs it", err)
	}
	bin, err := postgresBin()
	if err != nil {
		t.Skip(err)
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Skip(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	root, err := os.MkdirTemp("", "purser-clock-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(root); err != nil {
			t.Error(err)
		}
	})
	if err := os.Chown(root, uid, gid); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, "data")
	initdb := exec.CommandContext(t.Context(), filepath.Join(bin, "initdb"), "-D", data, "--auth", "trust")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	sp := newSpawner()
	defer func() { cancel(); wg.Wait(); sp.close() }()
	f := &DCFarm{pgRoot: root, pgBin: bin}
	dc := &DC{Name: "dc-1"}
	if err := f.steppableClock(dc); err != nil {
		t.Fatal(err)
	}
	pg := &Process{Name: "postgres", LogPath: filepath.Join(root, "postgres.log"), bin: filepath.Join(dc.pgBinDir, "postgres"),
		args: []string{"-D", data, "-k", root, "-c", "listen_addresses="}, workDir: root, cred: cred,
		stopSignal: syscall.SIGINT, sp: sp, logf: t.Logf, ctx: ctx, wg: &wg}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	defer pg.Stop(10 * time.Second)
	query := func(sql string) string {
		t.Helper()
		var out []byte
		var err error
		for range 50 { // until it accepts connections
			psql := exec.CommandContext(t.Context(), filepath.Join(bin, "psql"), "-h", root, "-U", "postgres", "-d", "postgres", "-Atc", sql)
			psql.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
			if out, err = psql.CombinedOutput(); err == nil {
				return strings.TrimSpace(string(out))
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("psql %q: %v: %s\n%s", sql, err, out, pg.Failure())
		return ""
	}
	epoch := func(s string) time.Time {
		t.Helper()
		sec, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("not an epoch: %q", s)
		}
		return time.Unix(0, int64(sec*1e9))
	}
	const now = "select extract(epoch from now())"
	if d := time.Until(epoch(query(now))); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("before any step, now() is %s from the true time", -d)
	}
	// settle is now()'s offset from the true time once it is within 2 s
	// of want, or after 15 s: libfaketime reads the clock's file again
	// once its cache (a second) has passed, which a backend forked from a
	// postmaster that read it just before may see some seconds later.
	settle := func(want time.Duration) time.Duration {
		t.Helper()
		var d time.Duration
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			if d = time.Until(epoch(query(now))); d > want-2*time.Second && d < want+2*time.Second {
				break
			}
		}
		return d
	}
	const step = 5 * time.Minute
	if err := f.StepClock(dc, step); err != nil {
		t.Fatal(err)
	}
	if d := settle(step); d < step-2*time.Second || d > step+2*time.Second {
		t.Errorf("after a step of %s, now() is %s from the true time", step, d)
	}
	start := time.Now()
	query("select pg_sleep(1)")
	if d := time.Since(start); d < time.Second || d > 10*time.Second {
		t.Errorf("pg_sleep(1) took %s under the stepped clock", d)
	}
	if err := f.StepClock(dc, 0); err != nil {
		t.Fatal(err)
	}
	if d := settle(0); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("stepped back, now() is %s from the true time", -d)
	}
}
