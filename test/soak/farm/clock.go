package farm

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// A DC's clock stepped. A machine whose clock is stepped (an NTP server
// that was wrong, a hypervisor's resume) sees its wall clock jump; its
// monotonic clock does not. The farm steps the wall clock of a DC's
// PostgreSQL with libfaketime (Debian's libfaketime package), preloaded
// into every PostgreSQL process of the DC: PostgreSQL reads the clock
// through libc, which libfaketime replaces. It offsets the wall clock by
// what a file says, read again every second, and leaves the monotonic
// clocks alone. When the node is the primary, the step is the database's
// time: now() of every transaction, by which purser's leases, heartbeat
// ages and schedules are counted.
//
// Nothing else of the DC is stepped. Its Go programs (the agent and the
// components, NATS, etcd, the member cluster's kube-apiserver) read the
// clock through the kernel's vDSO, never libc, so libfaketime cannot
// reach them, and a time namespace offsets only the monotonic and boot
// clocks, never the wall clock. Patroni (Python 3.11) cannot run under
// Debian 12's libfaketime with the monotonic clock left alone: its
// sleeps on an absolute monotonic deadline fail with EINVAL. What of the
// Go programs depends on the wall clock is the agent's heartbeat time,
// which purser ignores for the stream's own (internal/member/inventory),
// and the Lease renewals, which each side judges by whether they changed,
// on its own monotonic clock.

// Libfaketime is where Debian's libfaketime package puts the library.
const Libfaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

// clockFile holds the offset of dc's PostgreSQL's wall clock, in the
// Patroni folders, which the postgres user reads.
func (f *DCFarm) clockFile(dc *DC) string { return filepath.Join(f.pgRoot, "clock-"+dc.Name) }

// steppableClock gives dc's Patroni a folder of PostgreSQL's programs in
// which postgres runs with the DC's clock: the others are the machine's
// (links), and postgres a script that preloads libfaketime. Patroni
// starts PostgreSQL from its bin_dir, and every backend inherits the
// preload from the postmaster.
func (f *DCFarm) steppableClock(dc *DC) error {
	if err := f.StepClock(dc, 0); err != nil {
		return err
	}
	dir := filepath.Join(f.pgRoot, "bin-"+dc.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	progs, err := os.ReadDir(f.pgBin)
	if err != nil {
		return err
	}
	for _, p := range progs {
		if p.Name() == "postgres" {
			continue
		}
		if err := os.Symlink(filepath.Join(f.pgBin, p.Name()), filepath.Join(dir, p.Name())); err != nil {
			return err
		}
	}
	script := "#!/bin/sh\n" +
		"# PostgreSQL with the wall clock of " + dc.Name + " (test/soak/farm/clock.go): its offset is\n" +
		"# read from the file again at most every second; the monotonic clock is left alone.\n" +
		"LD_PRELOAD=" + Libfaketime + " FAKETIME_TIMESTAMP_FILE=" + f.clockFile(dc) +
		" FAKETIME_CACHE_DURATION=1 FAKETIME_DONT_FAKE_MONOTONIC=1 exec " + filepath.Join(f.pgBin, "postgres") + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "postgres"), []byte(script), 0o755); err != nil {
		return err
	}
	dc.pgBinDir = dir
	return nil
}

// StepClock sets the wall clock of dc's PostgreSQL to the true time plus
// offset (0: the true time), within a second; DCConfig.SteppableClocks
// must have been set.
func (f *DCFarm) StepClock(dc *DC, offset time.Duration) error {
	file := f.clockFile(dc)
	tmp := file + ".tmp"
	// libfaketime's relative form: "+N" or "-N" seconds from now.
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%+d\n", int64(offset.Seconds())), 0o644); err != nil {
		return fmt.Errorf("farm: step the clock of %s: %w", dc.Name, err)
	}
	// Renamed into place, so that no read finds it half written.
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("farm: step the clock of %s: %w", dc.Name, err)
	}
	return nil
}

// ClockSteppable reports whether dc's PostgreSQL runs with a clock
// StepClock moves.
func (dc *DC) ClockSteppable() bool { return dc.pgBinDir != "" }
