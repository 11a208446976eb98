package farm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// natsModule is the nats-server module of purser's go.mod; the farm runs
// the same server purser embeds, as separate processes.
const natsModule = "github.com/nats-io/nats-server/v2"

// Binaries are the programs a farm runs.
type Binaries struct {
	Purser     string
	NATSServer string
}

// Build builds purser from the checkout that holds the working directory
// and nats-server from the version purser's go.mod pins. Both go to
// <user cache dir>/purser/soak: nats-server once per version, purser once
// per checkout, where the go command relinks it only when a source
// changed, so that a second run starts at once.
func Build(ctx context.Context) (*Binaries, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return nil, err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return nil, fmt.Errorf("soak binaries: %w", err)
	}
	cache := filepath.Join(base, "purser", "soak")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, fmt.Errorf("soak binaries: %w", err)
	}
	version, err := goCommand(ctx, root, "list", "-m", "-f", "{{.Version}}", natsModule)
	if err != nil {
		return nil, err
	}
	b := &Binaries{NATSServer: filepath.Join(cache, "nats-server-"+version)}
	if _, err := os.Stat(b.NATSServer); err != nil {
		// Built beside its final name and renamed, so that an interrupted
		// build never leaves a broken binary in the cache.
		tmp := fmt.Sprintf("%s.%d.tmp", b.NATSServer, os.Getpid())
		if _, err := goCommand(ctx, root, "build", "-o", tmp, natsModule); err != nil {
			os.Remove(tmp)
			return nil, err
		}
		if err := os.Rename(tmp, b.NATSServer); err != nil {
			return nil, fmt.Errorf("soak binaries: %w", err)
		}
	}
	sum := sha256.Sum256([]byte(root))
	b.Purser = filepath.Join(cache, "purser-"+hex.EncodeToString(sum[:])[:12])
	if _, err := goCommand(ctx, root, "build", "-o", b.Purser, "./cmd/purser"); err != nil {
		return nil, err
	}
	return b, nil
}

// moduleRoot is the folder of purser's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	gomod, err := goCommand(ctx, "", "env", "GOMOD")
	if err != nil {
		return "", err
	}
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("soak binaries: not inside purser's module")
	}
	return filepath.Dir(gomod), nil
}

// goCommand runs the go command in dir and returns its trimmed output.
func goCommand(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}
