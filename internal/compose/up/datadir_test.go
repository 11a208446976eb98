package up

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDataDirOwnerOnly: a data folder made by hand, or by an older
// version, is the owner's alone once purser up has used it.
func TestDataDirOwnerOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Past the umask: the folder and its files start open to all.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{AdminTokenFile, TokensFile, KeyFile, DatabaseFile, DatabaseFile + "-wal"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := restrictDataDir(dir); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("data folder mode %o, want 700", st.Mode().Perm())
	}
	for _, name := range []string{AdminTokenFile, TokensFile, KeyFile, DatabaseFile, DatabaseFile + "-wal"} {
		if st, _ := os.Stat(filepath.Join(dir, name)); st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %o, want 600", name, st.Mode().Perm())
		}
	}
}
