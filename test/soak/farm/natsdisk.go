package farm

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A NATS node's disk filling up. Each DC's NATS store is a tmpfs of its
// own, NATSStoreSize bytes, mounted at the node's store folder before the
// node first starts: a filesystem small enough to fill in a moment, and
// one that only that node writes to, so that filling it starves that node
// alone. A restart of the node keeps the store (the mount outlives the
// process); the farm's Close unmounts it.

// NATSStoreSize is the size of each NATS node's store. JetStream sizes its
// file store at 75% of what is free at start when not told, about 384
// MiB; the components bound purser's streams to half of the tmpfs
// (--stream-store), so that the events and snapshots of a 2-hour soak drop
// their oldest rather than fill it, as they did before the bound.
const NATSStoreSize = 512 << 20

// natsStoreSourcePrefix names the farm's tmpfs mounts (their "device" in
// /proc/self/mountinfo), followed by the pid of the run that mounted
// them, so that a run that died without unmounting is swept at the next.
const natsStoreSourcePrefix = "purser-nats-"

// natsFill is the file that fills a store; JetStream keeps to its
// jetstream/ folder and never looks at it.
const natsFill = "fill"

func (f *DCFarm) natsStore(dc *DC) string { return filepath.Join(f.dir, "nats-"+dc.Name, "store") }

// mountNATSStore mounts dc's NATS store.
func (f *DCFarm) mountNATSStore(dc *DC) error {
	dir := f.natsStore(dc)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	src := natsStoreSourcePrefix + strconv.Itoa(os.Getpid())
	size := cmp.Or(f.natsStoreSize, NATSStoreSize)
	if err := unix.Mount(src, dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		return fmt.Errorf("farm: mount a %d MiB tmpfs as the NATS store of %s at %s: %w", size>>20, dc.Name, dir, err)
	}
	dc.natsMounted = true
	return nil
}

// unmountNATSStore unmounts dc's NATS store, once its node has stopped.
func (f *DCFarm) unmountNATSStore(dc *DC) error {
	if !dc.natsMounted {
		return nil
	}
	if err := unix.Unmount(f.natsStore(dc), unix.MNT_DETACH); err != nil {
		return fmt.Errorf("farm: unmount the NATS store of %s: %w", dc.Name, err)
	}
	dc.natsMounted = false
	return nil
}

// FillNATSDisk fills the filesystem of dc's NATS store with a file until
// a write fails for want of space, and returns how much it wrote: from
// then on every write of the node (a stream's message, a Raft log entry,
// a snapshot) fails with ENOSPC until FreeNATSDisk.
func (f *DCFarm) FillNATSDisk(dc *DC) (int64, error) {
	if !dc.natsMounted {
		return 0, fmt.Errorf("farm: the NATS store of %s is not a filesystem of its own", dc.Name)
	}
	fill, err := os.OpenFile(filepath.Join(f.natsStore(dc), natsFill), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer fill.Close()
	var written int64
	// Large writes first, then pages, down to the last free page.
	for _, size := range []int{1 << 20, 4 << 10} {
		buf := make([]byte, size)
		for {
			n, err := fill.Write(buf)
			written += int64(n)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				return written, fmt.Errorf("farm: fill the NATS store of %s: %w", dc.Name, err)
			}
		}
	}
	return written, nil
}

// FreeNATSDisk removes what FillNATSDisk wrote.
func (f *DCFarm) FreeNATSDisk(dc *DC) error {
	err := os.Remove(filepath.Join(f.natsStore(dc), natsFill))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// NATSDiskFree is what is free on the filesystem of dc's NATS store.
func (f *DCFarm) NATSDiskFree(dc *DC) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(f.natsStore(dc), &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// sweepNATSStores unmounts the NATS stores of runs that died without
// closing their farm.
func sweepNATSStores(logf func(string, ...any)) {
	mi, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer mi.Close()
	var stale []string
	sc := bufio.NewScanner(mi)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - FSTYPE SOURCE SUPEROPTIONS
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 0 || sep+2 >= len(fields) || len(fields) < 5 || fields[sep+1] != "tmpfs" {
			continue
		}
		rest, ok := strings.CutPrefix(fields[sep+2], natsStoreSourcePrefix)
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(rest)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || err == syscall.EPERM {
			continue // that run is alive
		}
		stale = append(stale, fields[4])
	}
	for _, dir := range stale {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			logf("farm: cannot unmount %s, a NATS store left by a run that died: %v", dir, err)
			continue
		}
		logf("farm: unmounted %s, a NATS store left by a run that died", dir)
	}
}
