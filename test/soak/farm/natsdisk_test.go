package farm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNATSDiskFill: the store of a DC's NATS node is a filesystem of its
// own; filled, it takes no more writes, and freed, it takes them again;
// the farm's Close (here, unmountNATSStore) leaves no mount behind.
func TestNATSDiskFill(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	f := &DCFarm{dir: t.TempDir(), natsStoreSize: 8 << 20}
	dc := &DC{Name: "dc-1"}
	if err := f.mountNATSStore(dc); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := f.unmountNATSStore(dc); err != nil {
			t.Error(err)
		}
		if mounted(t, f.natsStore(dc)) {
			t.Errorf("%s is still mounted", f.natsStore(dc))
		}
	}()
	if !mounted(t, f.natsStore(dc)) {
		t.Fatalf("%s is not a mount point", f.natsStore(dc))
	}
	store := filepath.Join(f.natsStore(dc), "jetstream")
	if err := os.WriteFile(store, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := f.FillNATSDisk(dc)
	if err != nil {
		t.Fatal(err)
	}
	if free, _ := f.NATSDiskFree(dc); free != 0 || n < 6<<20 {
		t.Errorf("filled with %d bytes, %d left free (want none)", n, free)
	}
	if err := os.WriteFile(store, make([]byte, 2<<20), 0o600); err == nil {
		t.Errorf("the node wrote 2 MiB to a full store")
	}
	if err := f.FreeNATSDisk(dc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(store, make([]byte, 2<<20), 0o600); err != nil {
		t.Errorf("after the fill was removed: %v", err)
	}
}

// mounted reports whether dir is a mount point of this mount namespace.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}
