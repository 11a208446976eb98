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

// Build builds purser from the checkout that holds the working directory,
// as the image does (deploy/Dockerfile), and nats-server from the version
// purser's go.mod pins. Both go to
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
			_ = os.Remove(tmp) // a failed build may have left none
			return nil, err
		}
		if err := os.Rename(tmp, b.NATSServer); err != nil {
			return nil, fmt.Errorf("soak binaries: %w", err)
		}
	}
	sum := sha256.Sum256([]byte(root))
	b.Purser = filepath.Join(cache, "purser-"+hex.EncodeToString(sum[:])[:12])
	env, args, err := imageBuild(filepath.Join(root, "deploy", "Dockerfile"), b.Purser)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = root, append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	// The image's binary says its version; a -X that names no variable
	// would be ignored silently.
	out, err := exec.CommandContext(ctx, b.Purser, "version").Output()
	if err != nil {
		return nil, fmt.Errorf("soak binaries: %s version: %w", b.Purser, err)
	}
	if !strings.HasPrefix(string(out), "purser "+ImageVersion+"\n") {
		return nil, fmt.Errorf("soak binaries: %s version said %q, want purser %s: the Dockerfile's -ldflags do not set the version",
			b.Purser, out, ImageVersion)
	}
	return b, nil
}

// ImageVersion is the VERSION the farm's purser is built with.
const ImageVersion = "soak"

// imageBuild reads the go build command of the image (deploy/Dockerfile's
// RUN line that builds ./cmd/purser) and returns its environment and its
// arguments, building into out with VERSION set to ImageVersion: the farm
// runs the binary the image ships, static and trimmed, not a developer
// build.
func imageBuild(dockerfile, out string) (env, args []string, err error) {
	data, err := os.ReadFile(dockerfile)
	if err != nil {
		return nil, nil, fmt.Errorf("soak binaries: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		run, ok := strings.CutPrefix(strings.TrimSpace(line), "RUN ")
		if !ok || !strings.Contains(run, "go build") || !strings.HasSuffix(run, "./cmd/purser") {
			continue
		}
		words, err := shellWords(strings.ReplaceAll(run, "${VERSION}", ImageVersion))
		if err != nil {
			return nil, nil, fmt.Errorf("soak binaries: %s: %w", dockerfile, err)
		}
		for len(words) > 0 && strings.Contains(words[0], "=") {
			env, words = append(env, words[0]), words[1:]
		}
		if len(words) < 2 || words[0] != "go" || words[1] != "build" {
			return nil, nil, fmt.Errorf("soak binaries: %s: cannot read %q", dockerfile, run)
		}
		args = words[1:]
		for i := range args {
			if args[i] == "-o" && i+1 < len(args) {
				args[i+1] = out
			}
		}
		return env, args, nil
	}
	return nil, nil, fmt.Errorf("soak binaries: %s has no RUN line that builds ./cmd/purser", dockerfile)
}

// shellWords splits a command line into words as a shell would, for the
// little the Dockerfile uses: spaces and double quotes.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unclosed quote in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
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
