package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"sigs.k8s.io/yaml"
)

// Config is where the server is and who we are: what a command talks to
// once flags, environment and the client config file are resolved.
type Config struct {
	Server string `json:"server"`
	Token  string `json:"token"`
	// AuditKey is the public key that signs the server's audit anchors
	// (ed25519:...), which `purser history --verify` checks the newest
	// anchor with.
	AuditKey string `json:"auditKey,omitempty"`
	// Context names the context of the client config file the server came
	// from, empty when flags or the environment named it.
	Context string `json:"-"`
}

// Context is one server a user can talk to, as a context in kubectl's
// kubeconfig names a cluster and a user: its name, its address, the token
// to send, and the data folder of the `purser up` that serves it (empty
// for a server started otherwise), where its tokens and policy files are.
type Context struct {
	Name    string `json:"name"`
	Server  string `json:"server"`
	Token   string `json:"token"`
	DataDir string `json:"dataDir,omitempty"`
	// AuditKey is the public key of the server's audit anchors.
	AuditKey string `json:"auditKey,omitempty"`
}

// File is the client config file: every context, and the one commands use
// when they are not told which.
type File struct {
	CurrentContext string    `json:"current-context,omitempty"`
	Contexts       []Context `json:"contexts,omitempty"`
}

// legacyFile is the client config before contexts: one server, one token.
type legacyFile struct {
	Server   string `json:"server"`
	Token    string `json:"token"`
	AuditKey string `json:"auditKey"`
}

// LegacyContext is the name given to the single server of a client config
// written before contexts existed.
const LegacyContext = "default"

// DefaultConfigPath is the client config `purser up` writes.
func DefaultConfigPath() (string, error) {
	if p := os.Getenv("PURSER_CONFIG"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "purser", "config.yaml"), nil
}

// Find returns the context of that name.
func (f *File) Find(name string) (Context, bool) {
	i := slices.IndexFunc(f.Contexts, func(c Context) bool { return c.Name == name })
	if i < 0 {
		return Context{}, false
	}
	return f.Contexts[i], true
}

// Remove deletes the context of that name; the current context is unset
// when it was that one.
func (f *File) Remove(name string) {
	f.Contexts = slices.DeleteFunc(f.Contexts, func(c Context) bool { return c.Name == name })
	if f.CurrentContext == name {
		f.CurrentContext = ""
	}
}

// Names lists the contexts' names, for messages.
func (f *File) Names() []string {
	names := make([]string, len(f.Contexts))
	for i, c := range f.Contexts {
		names[i] = c.Name
	}
	return names
}

// ReadFile reads a client config; a missing file is an empty config. A file
// written before contexts existed reads as one context named "default".
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &File{}, nil
	}
	if err != nil {
		return nil, err
	}
	var f File
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("client config %s: %w", path, err)
	}
	if len(f.Contexts) == 0 {
		var old legacyFile
		if err := yaml.Unmarshal(data, &old); err == nil && old.Server != "" {
			f = File{CurrentContext: LegacyContext, Contexts: []Context{{Name: LegacyContext, Server: old.Server, Token: old.Token, AuditKey: old.AuditKey}}}
		}
	}
	return &f, nil
}

// writeFile saves a client config readable by its owner only, atomically.
func writeFile(path string, f *File) error {
	data, err := yaml.Marshal(f)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// EditFile reads the client config at path, lets edit change it, and
// writes it back, holding a lock so that two `purser up` starting at once
// do not lose each other's context.
func EditFile(path string, edit func(f *File) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	// Closing the file releases the lock taken on it.
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	f, err := ReadFile(path)
	if err != nil {
		return err
	}
	if err := edit(f); err != nil {
		return err
	}
	return writeFile(path, f)
}

// SaveUpContext adds to f, or refreshes, the context of the `purser up`
// whose data folder is up.DataDir (with its server, token and audit key).
// The context keeps its name across restarts (it is found by its folder);
// a new one is named after the folder, with a number added when another
// folder of the same name already has that name. It becomes the current
// context unless the current one is another `purser up` that is alive
// (live says so): two on one machine never take the flag-less commands
// from each other silently. It returns the context's name and whether it
// is now the current one.
func SaveUpContext(f *File, up Context, live func(Context) bool) (string, bool) {
	name := ""
	for i, c := range f.Contexts {
		if c.DataDir == up.DataDir {
			name, up.Name = c.Name, c.Name
			f.Contexts[i] = up
			break
		}
	}
	if name == "" {
		base := filepath.Base(up.DataDir)
		name = base
		for n := 2; ; n++ {
			if _, taken := f.Find(name); !taken {
				break
			}
			name = base + "-" + strconv.Itoa(n)
		}
		up.Name = name
		f.Contexts = append(f.Contexts, up)
	}
	if cur, ok := f.Find(f.CurrentContext); ok && cur.Name != name && cur.DataDir != "" && live(cur) {
		return name, false
	}
	f.CurrentContext = name
	return name, true
}

// Prune removes the contexts of `purser up` instances that are gone: the
// data folder no longer exists and the server does not answer (answers
// says whether it does). Contexts of servers started otherwise (no data
// folder) are never removed. It returns the names removed.
func (f *File) Prune(answers func(Context) bool) []string {
	var gone []string
	for _, c := range f.Contexts {
		if c.DataDir == "" {
			continue
		}
		if _, err := os.Stat(c.DataDir); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if answers(c) {
			continue
		}
		gone = append(gone, c.Name)
	}
	for _, n := range gone {
		f.Remove(n)
	}
	return gone
}

// Selection is what a command was told about where to send requests.
type Selection struct {
	Server, Token string // --server and --token
	Context       string // --context
	ConfigPath    string // the client config file; empty: DefaultConfigPath
}

// Resolve decides the server and token of a command. Flags win; then an
// explicit --context, whose server and token come together; then the
// environment (PURSER_SERVER, PURSER_TOKEN); then the current context of
// the client config file.
func Resolve(sel Selection) (Config, error) {
	c := Config{Server: sel.Server, Token: sel.Token}
	path := sel.ConfigPath
	if path == "" {
		var err error
		if path, err = DefaultConfigPath(); err != nil && sel.Context != "" {
			return c, err
		}
	}
	var file *File
	load := func() error {
		if file != nil || path == "" {
			return nil
		}
		var err error
		file, err = ReadFile(path)
		return err
	}
	// A context's token (and audit key) is only ever used with that
	// context's server.
	fill := func(ctx Context) {
		if c.Server != "" && c.Server != ctx.Server {
			return
		}
		c.Context, c.Server = ctx.Name, ctx.Server
		if c.Token == "" {
			c.Token = ctx.Token
		}
		if c.AuditKey == "" {
			c.AuditKey = ctx.AuditKey
		}
	}
	if sel.Context != "" {
		if err := load(); err != nil {
			return c, err
		}
		ctx, ok := file.Find(sel.Context)
		if !ok {
			return c, fmt.Errorf("no context %q in %s (contexts: %v); `purser config get-contexts` lists them", sel.Context, path, file.Names())
		}
		fill(ctx)
	}
	if c.Server == "" {
		c.Server = os.Getenv("PURSER_SERVER")
	}
	if c.Token == "" {
		c.Token = os.Getenv("PURSER_TOKEN")
	}
	if c.AuditKey == "" {
		c.AuditKey = os.Getenv("PURSER_AUDIT_KEY")
	}
	if c.Server == "" || c.Token == "" || c.AuditKey == "" {
		if err := load(); err != nil {
			return c, err
		}
		if file != nil && file.CurrentContext != "" {
			ctx, ok := file.Find(file.CurrentContext)
			if !ok {
				return c, fmt.Errorf("the current context %q of %s does not exist; choose one with `purser config use-context`", file.CurrentContext, path)
			}
			fill(ctx)
		}
	}
	if c.Server == "" {
		return c, errors.New("no purser server: pass --server URL or --context NAME, set PURSER_SERVER, or run `purser up` on this machine")
	}
	if c.Token == "" {
		return c, fmt.Errorf("no token for %s: pass --token, set PURSER_TOKEN, run purser login, or run `purser up` on this machine", c.Server)
	}
	return c, nil
}

// ResolveWithLogin is Resolve where a login cached for the server (purser
// login) comes before a context's token: a user who signed in means to act
// as themselves, not as the admin `purser up` wrote down. --token still
// wins, and so does $PURSER_TOKEN unless --context names a context (whose
// server then gets no token meant for another). The login's ID token is
// refreshed when it expired.
func ResolveWithLogin(ctx context.Context, sel Selection) (Config, error) {
	if sel.Token != "" || (sel.Context == "" && os.Getenv("PURSER_TOKEN") != "") {
		return Resolve(sel)
	}
	// The server (and context) as Resolve finds them, whatever the token:
	// a stand-in keeps it from asking for one.
	probe := sel
	probe.Token = "stand-in"
	c, err := Resolve(probe)
	if err != nil {
		return c, err
	}
	l, err := LoadLogin(c.Server)
	if err != nil {
		return c, err
	}
	if l == nil {
		return Resolve(sel)
	}
	if c.Token, err = l.Token(ctx); err != nil {
		return c, err
	}
	return c, nil
}

// SelectedContext returns the context sel names (--context), else the
// current one of the client config: for commands that work on the files of
// a context's data folder rather than on its server.
func SelectedContext(sel Selection) (Context, error) {
	path := sel.ConfigPath
	if path == "" {
		var err error
		if path, err = DefaultConfigPath(); err != nil {
			return Context{}, err
		}
	}
	f, err := ReadFile(path)
	if err != nil {
		return Context{}, err
	}
	name := sel.Context
	if name == "" {
		name = f.CurrentContext
	}
	if name == "" {
		return Context{}, fmt.Errorf("%s has no current context; pass --context NAME or run `purser up`", path)
	}
	c, ok := f.Find(name)
	if !ok {
		return Context{}, fmt.Errorf("no context %q in %s (contexts: %v)", name, path, f.Names())
	}
	return c, nil
}
