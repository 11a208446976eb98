package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Identities is who may call the API and what they may do, as the api
// serves it: the tokens file and the policy file, reloaded when they
// change, and an OpenID Connect provider's ID tokens when one is
// configured.
type Identities struct {
	tokensPath, policyPath string
	oidc                   *OIDC
	log                    *slog.Logger
	interval               time.Duration

	tokens atomic.Pointer[Authenticator]
	pol    atomic.Pointer[policy.Policy]

	mu    sync.Mutex
	files map[string]*watched
	// reloads counts successful reloads, for tests and metrics to wait on.
	reloads atomic.Int64
}

// watched is what was last read of one file.
type watched struct {
	data    []byte
	modTime time.Time
	size    int64
	loaded  time.Time
	err     error // the last read or parse failure, nil when the data in force is the file's
}

// IdentitiesConfig is what LoadIdentities needs.
type IdentitiesConfig struct {
	// TokensFile may be empty for a component that only decides on the
	// policy (the submitter, the syncer): then no token authenticates.
	TokensFile, PolicyFile string
	OIDC                   *OIDC         // nil: tokens file only
	Logger                 *slog.Logger  // nil discards
	Interval               time.Duration // how often the files are looked at; 0: ReloadInterval
}

// ReloadInterval is how often the files are looked at. Polling rather
// than inotify: a Kubernetes Secret or ConfigMap volume replaces its files
// by swapping a symlink, which a watch on the file misses.
const ReloadInterval = time.Second

// LoadIdentities reads both files; either failing is an error at start.
// Later failures keep what was in force (Run).
func LoadIdentities(cfg IdentitiesConfig) (*Identities, error) {
	id := &Identities{tokensPath: cfg.TokensFile, policyPath: cfg.PolicyFile, oidc: cfg.OIDC, log: cfg.Logger,
		interval: cfg.Interval, files: map[string]*watched{}}
	if id.log == nil {
		id.log = slog.New(slog.DiscardHandler)
	}
	if id.interval <= 0 {
		id.interval = ReloadInterval
	}
	for _, path := range id.paths() {
		if changed, err := id.reload(path); err != nil {
			return nil, err
		} else if !changed {
			return nil, fmt.Errorf("read %s: no content", path)
		}
	}
	return id, nil
}

// paths are the files followed.
func (id *Identities) paths() []string {
	if id.tokensPath == "" {
		return []string{id.policyPath}
	}
	return []string{id.tokensPath, id.policyPath}
}

// Policy is the policy in force.
func (id *Identities) Policy() *policy.Policy { return id.pol.Load() }

// AuthorizeKind is Policy.AuthorizeKind with the policy in force, so that
// the submitter and the syncer of purser up follow the policy file as the
// api does.
func (id *Identities) AuthorizeKind(u policy.User, t policy.Target) policy.KindDecision {
	return id.Policy().AuthorizeKind(u, t)
}

// OIDC is the provider configured, or nil.
func (id *Identities) OIDC() *OIDC { return id.oidc }

// PodSecurityLevel is the policy in force's (Policy.PodSecurityLevel).
func (id *Identities) PodSecurityLevel(ns string) admission.Level {
	return id.Policy().PodSecurityLevel(ns)
}

// BindableClusterRoles is the policy in force's.
func (id *Identities) BindableClusterRoles(ns string) []string {
	return id.Policy().BindableClusterRoles(ns)
}

// EmbeddedRules is the policy in force's.
func (id *Identities) EmbeddedRules() []admission.EmbeddedRule { return id.Policy().EmbeddedRules() }

// OpaqueKind is the policy in force's.
func (id *Identities) OpaqueKind(u policy.User, ns string, gk schema.GroupKind) bool {
	return id.Policy().OpaqueKind(u, ns, gk)
}

// Reloads counts the reloads that took effect since start.
func (id *Identities) Reloads() int64 { return id.reloads.Load() }

// Authenticate returns the user a bearer token belongs to: a token of the
// tokens file, or an ID token of the OIDC provider.
func (id *Identities) Authenticate(ctx context.Context, token string) (policy.User, bool) {
	if tokens := id.tokens.Load(); tokens != nil {
		if u, ok := tokens.Authenticate(token); ok {
			return u, true
		}
	}
	if id.oidc == nil || !LooksLikeJWT(token) {
		return policy.User{}, false
	}
	u, err := id.oidc.Authenticate(ctx, token)
	if err != nil {
		id.log.Debug("ID token refused", "error", err)
		return policy.User{}, false
	}
	return u, true
}

// Problem says which file could not be reloaded, and that the last good
// version of it is in force; nil when both are as on disk.
func (id *Identities) Problem() error {
	id.mu.Lock()
	defer id.mu.Unlock()
	var errs []error
	for _, path := range id.paths() {
		if w := id.files[path]; w != nil && w.err != nil {
			errs = append(errs, fmt.Errorf("%w; serving the version loaded at %s", w.err, w.loaded.UTC().Format(time.RFC3339)))
		}
	}
	return errors.Join(errs...)
}

// Run looks at both files every interval (lengthened by up to a fifth)
// and reloads what changed, until ctx is done. A file that does not parse,
// or is gone, leaves the last good version in force and says so once in
// the log and in Problem.
func (id *Identities) Run(ctx context.Context) error {
	reconcile.Every(ctx, id.interval, func(context.Context) {
		for _, path := range id.paths() {
			if changed, err := id.reload(path); err != nil {
				id.log.Error("cannot reload; the last good version stays in force", "file", path, "error", err)
			} else if changed {
				id.log.Info("reloaded", "file", path)
			}
		}
	})
	return nil
}

// reload reads path if it changed since the last look, and puts it in
// force if it parses. It reports an error only when the failure is new.
func (id *Identities) reload(path string) (bool, error) {
	id.mu.Lock()
	defer id.mu.Unlock()
	w := id.files[path]
	fi, err := os.Stat(path)
	if err == nil && w != nil && fi.ModTime().Equal(w.modTime) && fi.Size() == w.size {
		return false, nil
	}
	var data []byte
	if err == nil {
		data, err = os.ReadFile(path)
	}
	if err == nil && w != nil && bytes.Equal(data, w.data) {
		w.modTime, w.size = fi.ModTime(), fi.Size()
		return false, nil // touched, not changed
	}
	if err == nil && w != nil && len(bytes.TrimSpace(data)) == 0 {
		// An editor that truncates before it writes shows an empty file
		// for a moment; put in force, it would take every right away.
		err = fmt.Errorf("%s is empty (an empty list is written as such, not as an empty file)", path)
	}
	if err == nil {
		err = id.apply(path, data)
	}
	if err != nil {
		if w == nil {
			return false, err // at start: no good version to keep
		}
		// Remember the stat, so that the same bad file is reported once.
		if fi != nil {
			w.modTime, w.size = fi.ModTime(), fi.Size()
		}
		w.data = data
		isNew := w.err == nil || w.err.Error() != err.Error()
		w.err = err
		if isNew {
			return false, err
		}
		return false, nil
	}
	loaded := time.Now()
	id.files[path] = &watched{data: data, modTime: fi.ModTime(), size: fi.Size(), loaded: loaded}
	if w != nil {
		id.reloads.Add(1)
	}
	return true, nil
}

func (id *Identities) apply(path string, data []byte) error {
	switch path {
	case id.tokensPath:
		a, err := ParseTokens(path, data)
		if err != nil {
			return err
		}
		id.tokens.Store(a)
	case id.policyPath:
		p, err := policy.ParsePolicy(path, data)
		if err != nil {
			return err
		}
		id.pol.Store(p)
	}
	return nil
}

// PriorityClass is the policy in force's.
func (id *Identities) PriorityClass(name string) (int32, bool) {
	return id.Policy().PriorityClass(name)
}

// Priority is the policy in force's.
func (id *Identities) Priority(author policy.User, ns string, prio *intstr.IntOrString) int32 {
	return id.Policy().Priority(author, ns, prio)
}

// PriorityClassesFor is the policy in force's.
func (id *Identities) PriorityClassesFor(ns string) []string {
	return id.Policy().PriorityClassesFor(ns)
}

// FairShareWeight is the policy in force's.
func (id *Identities) FairShareWeight(ns string) float64 { return id.Policy().FairShareWeight(ns) }

// Identities answers what the loops ask the policy, as it is reloaded.
var _ policy.KindPolicy = (*Identities)(nil)
