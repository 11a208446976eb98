package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/hub/anchor"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// verifyFarm is `purser api` (the real binary) over a database of one
// engine and a real NATS, with the client's configuration holding the
// api's public key, as an operator sets it up.
type verifyFarm struct {
	t            *testing.T
	bin, dsn     string
	dir          string
	nats         *streamtest.Server
	api          *running
	url, token   string
	clientConfig string
}

func startVerifyFarm(t *testing.T, bin string, eng storetest.Engine) *verifyFarm {
	f := &verifyFarm{t: t, bin: bin, dsn: eng.NewDSN(t), dir: t.TempDir()}
	f.token = writeAPIFiles(t, f.dir)
	f.nats = streamtest.Start(t, "")
	f.startAPI()
	key, err := anchor.LoadKeyFile(filepath.Join(f.dir, "audit.key"))
	if err != nil {
		t.Fatal(err)
	}
	f.clientConfig = filepath.Join(f.dir, "client.yaml")
	cfg := fmt.Sprintf("server: %s\ntoken: %s\nauditKey: %s\n", f.url, f.token, audit.PublicKeyString(key.Public().(ed25519.PublicKey)))
	if err := os.WriteFile(f.clientConfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// startAPI starts (or restarts) the api. Only its own commits wake its
// publisher: the poll is an hour, so whatever is anchored was anchored on
// commit.
func (f *verifyFarm) startAPI() {
	if f.api != nil {
		if err := f.api.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			f.t.Fatal(err)
		}
		<-f.api.done
	}
	listen := freeAddr(f.t)
	f.api = startPurser(f.t, f.bin, "api", "--database", f.dsn, "--nats", f.nats.URL, "--listen", listen,
		"--tokens", filepath.Join(f.dir, "tokens.yaml"), "--policy", filepath.Join(f.dir, "policy.yaml"),
		"--key-file", filepath.Join(f.dir, "secret.key"), "--audit-key", filepath.Join(f.dir, "audit.key"),
		"--audit-anchor-interval", "1h")
	f.api.waitLine(f.t, "listening on", time.Minute)
	f.url = "http://" + listen
	if f.clientConfig != "" {
		data := strings.Split(mustRead(f.t, f.clientConfig), "\n")
		data[0] = "server: " + f.url
		if err := os.WriteFile(f.clientConfig, []byte(strings.Join(data, "\n")), 0o600); err != nil {
			f.t.Fatal(err)
		}
	}
}

// submit submits n runnables through the CLI.
func (f *verifyFarm) submit(prefix string, n int) {
	f.t.Helper()
	for i := range n {
		body := strings.Replace(mustRead(f.t, "../../examples/runnable-job.yaml"), "name: nightly-report", fmt.Sprintf("name: %s-%d", prefix, i), 1)
		cmd := exec.CommandContext(f.t.Context(), f.bin, "apply", "-f", "-")
		cmd.Env = append(os.Environ(), "PURSER_CONFIG="+f.clientConfig, "PURSER_SERVER=", "PURSER_TOKEN=")
		cmd.Stdin = strings.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			f.t.Fatalf("apply: %v\n%s", err, out)
		}
	}
}

// verifyHTTP is GET /api/v1/history/verify.
func (f *verifyFarm) verifyHTTP() map[string]any {
	f.t.Helper()
	req, _ := http.NewRequestWithContext(f.t.Context(), http.MethodGet, f.url+"/api/v1/history/verify", http.NoBody)
	req.Header.Set("Authorization", "Bearer "+f.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		f.t.Fatalf("verify: %s, %v", resp.Status, err)
	}
	return out
}

// verifyCLI is purser history --verify: its output and whether it passed.
func (f *verifyFarm) verifyCLI() (string, bool) {
	f.t.Helper()
	cmd := exec.CommandContext(f.t.Context(), f.bin, "history", "--verify")
	cmd.Env = append(os.Environ(), "PURSER_CONFIG="+f.clientConfig, "PURSER_SERVER=", "PURSER_TOKEN=", "PURSER_AUDIT_KEY=")
	out, err := cmd.CombinedOutput()
	var exited *exec.ExitError
	if err != nil && !errors.As(err, &exited) {
		f.t.Fatal(err)
	}
	return string(out), err == nil
}

// mustFail asserts that both the API and the CLI fail, naming want.
func (f *verifyFarm) mustFail(want string) {
	f.t.Helper()
	v := f.verifyHTTP()
	if v["ok"] != false || !strings.Contains(fmt.Sprint(v["reason"]), want) {
		f.t.Fatalf("GET /history/verify: %v, want ok false and a reason with %q", v, want)
	}
	out, ok := f.verifyCLI()
	if ok || !strings.Contains(out, want) {
		f.t.Fatalf("purser history --verify passed=%v, want a failure with %q:\n%s", ok, want, out)
	}
}

// waitAnchored waits until the chain's head (after the last submission)
// is anchored: verification passes and counts n entries.
func (f *verifyFarm) waitAnchored(n int) {
	f.t.Helper()
	sandboxtest.Eventually(f.t, streamtest.Timeout, fmt.Sprintf("head %d anchored", n), func(context.Context) error {
		if v := f.verifyHTTP(); v["ok"] != true || v["entries"] != float64(n) || latestAnchoredSeq(f.t, f.nats.URL) != int64(n) {
			return fmt.Errorf("verify says %v", v)
		}
		return nil
	})
	if out, ok := f.verifyCLI(); !ok || !strings.Contains(out, fmt.Sprintf("audit chain intact: %d entries verified", n)) {
		f.t.Fatalf("purser history --verify on the intact chain:\n%s", out)
	}
}

// latestAnchoredSeq reads the newest anchor's seq straight from NATS.
func latestAnchoredSeq(t *testing.T, url string) int64 {
	c := streamtest.Connect(t, url)
	defer c.Close()
	s, err := c.JetStream().Stream(t.Context(), stream.AuditStream)
	if err != nil || s.CachedInfo().State.Msgs == 0 {
		return -1
	}
	m, err := s.GetMsg(t.Context(), s.CachedInfo().State.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	var env audit.SignedAnchor
	var a audit.Anchor
	if json.Unmarshal(m.Data, &env) != nil || json.Unmarshal(env.Anchor, &a) != nil {
		return -1
	}
	return a.Seq
}

func (f *verifyFarm) entries() []*audit.Entry {
	f.t.Helper()
	db, err := store.Open(f.t.Context(), f.dsn)
	if err != nil {
		f.t.Fatal(err)
	}
	defer func() { _ = db.Close() }() // only read from
	var out []*audit.Entry
	if err := db.Read(f.t.Context(), func(tx *store.Tx) (err error) {
		out, err = tx.Audit().List(f.t.Context(), store.AuditFilter{})
		return err
	}); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// GET /api/v1/history/verify and `purser history --verify` fail for each
// way of rewriting the audit log unseen: an edited row, a consistent
// rewrite with forged anchors, a deleted or recreated AUDIT stream, and a
// tail cut right after the last write.
func TestHistoryVerifyFails(t *testing.T) {
	bin := buildPurser(t)
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			t.Run("edited row", func(t *testing.T) {
				f := startVerifyFarm(t, bin, eng)
				f.submit("r", 3)
				f.waitAnchored(3)
				raw := storetest.RawDB(t, f.dsn)
				if _, err := raw.Exec(storetest.Rebind(f.dsn, "UPDATE audit_log SET actor = ? WHERE seq = ?"), "mallory", 2); err != nil {
					t.Fatal(err)
				}
				f.mustFail("hash mismatch")
			})
			t.Run("consistent rewrite with forged anchors", func(t *testing.T) {
				f := startVerifyFarm(t, bin, eng)
				f.submit("r", 4)
				f.waitAnchored(4)
				entries := f.entries()
				storetest.ForgeAuditTail(t, f.dsn, entries, 2)
				// Anchors for the forged heads: one unsigned, as the old
				// format was, one signed by the forger's own key.
				c := streamtest.Connect(t, f.nats.URL)
				forged, _ := json.Marshal(map[string]any{"seq": 4, "hash": entries[3].Hash, "publishedAt": time.Now().UTC()})
				if err := c.Publish(t.Context(), stream.SubjectAuditAnchors, "forged-1", forged); err != nil {
					t.Fatal(err)
				}
				// The rewritten entries' MACs no longer check; the forged
				// anchors would not either.
				f.mustFail("forged: its MAC does not check")
			})
			t.Run("anchor signed by another key", func(t *testing.T) {
				f := startVerifyFarm(t, bin, eng)
				f.submit("r", 2)
				f.waitAnchored(2)
				other, err := anchor.EnsureKeyFile(filepath.Join(t.TempDir(), "other.key"))
				if err != nil {
					t.Fatal(err)
				}
				msg, _ := audit.Sign(audit.Anchor{N: 99, Seq: 2, Hash: "forged"}, other)
				c := streamtest.Connect(t, f.nats.URL)
				if err := c.Publish(t.Context(), stream.SubjectAuditAnchors, "forged-2", msg); err != nil {
					t.Fatal(err)
				}
				f.mustFail("not a trusted key")
			})
			t.Run("deleted or recreated stream", func(t *testing.T) {
				f := startVerifyFarm(t, bin, eng)
				f.submit("r", 2)
				f.waitAnchored(2)
				c := streamtest.Connect(t, f.nats.URL)
				if err := c.JetStream().DeleteStream(t.Context(), stream.AuditStream); err != nil {
					t.Fatal(err)
				}
				f.mustFail("the AUDIT stream does not exist")
				f.startAPI() // declares it again, empty
				f.mustFail("the stream was deleted or recreated")
				f.submit("after", 1)
				f.mustFail("the stream was deleted or recreated")

				// Once the incident is recorded, an admin begins a new record.
				out, err := exec.CommandContext(t.Context(), f.bin, "history", "restart-anchors", "--server", f.url, "--token", f.token,
					"--reason", "AUDIT lost in INC-9").CombinedOutput()
				if err != nil || !strings.Contains(string(out), "begun again at entry 4 by admin: AUDIT lost in INC-9") {
					t.Fatalf("restart-anchors: %v\n%s", err, out)
				}
				f.submit("later", 1)
				f.waitAnchored(5)
			})
			t.Run("entry appended by hand", func(t *testing.T) {
				f := startVerifyFarm(t, bin, eng)
				f.submit("r", 3)
				f.waitAnchored(3)
				// A well-chained entry, head moved with it, a month in
				// the past: what someone with the database's password
				// but not purser's key file can write.
				storetest.AppendAuditByHand(t, f.dsn, &audit.Entry{Time: time.Now().AddDate(0, -1, 0), Actor: "admin", Action: "approve",
					Kind: "Runnable", Namespace: "team-a", Name: "r-0", Summary: "approved r-0"})
				f.mustFail("unsigned: it carries no MAC")
				// The api's next commit is anchored only up to the entry
				// before the forged one: never past it.
				f.submit("after", 1)
				sandboxtest.Eventually(t, streamtest.Timeout, "the api refusing to anchor", func(context.Context) error {
					if out := f.api.output(); !strings.Contains(out, "refusing to anchor the chain past entry 3: entry 4: unsigned") {
						return errors.New("not yet in the api's log")
					}
					return nil
				})
				if seq := latestAnchoredSeq(t, f.nats.URL); seq != 3 {
					t.Fatalf("the newest anchor is at seq %d, want 3: the forged entry was vouched for", seq)
				}
			})
			t.Run("MACs stripped, then an entry appended", func(t *testing.T) {
				f := startVerifyFarm(t, bin, eng)
				f.submit("r", 3)
				f.waitAnchored(3)
				// With every MAC gone the chain would pass for one an
				// older purser wrote, but the anchors say where MACs began.
				raw := storetest.RawDB(t, f.dsn)
				if _, err := raw.ExecContext(t.Context(), "UPDATE audit_log SET mac = NULL"); err != nil {
					t.Fatal(err)
				}
				storetest.AppendAuditByHand(t, f.dsn, &audit.Entry{Time: time.Now(), Actor: "admin", Action: "approve", Summary: "approved"})
				f.mustFail("unsigned: it carries no MAC")
			})
			t.Run("tail cut after the last write", func(t *testing.T) {
				f := startVerifyFarm(t, bin, eng)
				f.submit("r", 3)
				f.waitAnchored(3) // anchored on commit: the poll is an hour
				storetest.CutAuditTail(t, f.dsn, 2)
				f.mustFail("missing: seq 3 was anchored")
			})
		})
	}
}
