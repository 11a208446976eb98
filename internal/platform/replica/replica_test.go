package replica

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestIdentity: the identity names the host and the process, and stays the
// same for the life of the process (a lease renewed under another name
// would look like a second replica).
func TestIdentity(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	id := Identity()
	if !strings.HasPrefix(id, host+"-") || !strings.HasSuffix(id, "-"+strconv.Itoa(os.Getpid())) {
		t.Fatalf("identity %q does not name host %q and pid %d", id, host, os.Getpid())
	}
	if again := Identity(); again != id {
		t.Fatalf("identity changed within the process: %q, then %q", id, again)
	}
}
