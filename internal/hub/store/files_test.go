package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestSQLiteFilesOwnerOnly: the database and its WAL files are the
// owner's alone, even when the file existed with a wider mode.
func TestSQLiteFilesOwnerOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "purser.db")
	for _, p := range []string{path, path + "-wal"} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	s := openDSN(t, path)
	mustTx(t, s, func(tx *Tx) error {
		return tx.Clusters().Create(context.Background(), &Cluster{Name: "c", Spec: []byte("{}")})
	})
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if mode := st.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %o, want 600", filepath.Base(p), mode)
		}
	}
}
