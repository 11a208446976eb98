package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/purser-io/purser/internal/platform/reconcile"
)

// LeaderElection configures the election among the agents of one cluster,
// through a coordination.k8s.io/v1 Lease in the member cluster. Only the
// leader watches, publishes, snapshots, heartbeats and fences; the others
// campaign until the lease is free. A leader that cannot renew stops all
// of it within RenewDeadline, before a standby can take over (after
// LeaseDuration), and campaigns again as a standby.
type LeaderElection struct {
	Enabled bool
	// Namespace holds the Lease; it is created when missing
	// (purser-system).
	Namespace string
	// Name is the Lease's name (purser-agent).
	Name string
	// Identity names this replica in the Lease and in its heartbeats
	// (host name and pid). It is used even when the election is off.
	Identity string
	// LeaseDuration (15s): how long after the leader's last renewal a
	// standby takes over. RenewDeadline (10s): how long the leader keeps
	// failing to renew before it stops working. RetryPeriod (2s): the wait
	// between attempts. LeaseDuration must exceed RenewDeadline +
	// RetryPeriod, the margin by which a leader that cannot renew stops
	// before a standby starts. Client-go counts the lease in whole seconds.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// Defaults of LeaderElection.
const (
	DefaultLeaderElectionNamespace = "purser-system"
	DefaultLeaderElectionName      = "purser-agent"
)

// elector holds what each term's leaderelection.LeaderElector is built
// from.
type elector struct {
	cfg  LeaderElection
	kube kubernetes.Interface
	lock resourcelock.Interface
}

func newElector(rc *rest.Config, cfg *LeaderElection) (*elector, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultLeaderElectionNamespace
	}
	if cfg.Name == "" {
		cfg.Name = DefaultLeaderElectionName
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = 15 * time.Second
	}
	if cfg.RenewDeadline <= 0 {
		cfg.RenewDeadline = 10 * time.Second
	}
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = 2 * time.Second
	}
	// A leader stops working at the latest RetryPeriod + RenewDeadline
	// after its last renewal; a standby starts LeaseDuration after it.
	if cfg.LeaseDuration <= cfg.RenewDeadline+cfg.RetryPeriod {
		return nil, fmt.Errorf("lease duration %s must exceed the renew deadline %s plus the retry period %s, or two leaders may work at once",
			cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod)
	}
	// As client-go's own NewFromKubeconfig does: a call that hangs must
	// not use up the whole renew deadline.
	rc = rest.CopyConfig(rc)
	rc.Timeout = cfg.RenewDeadline / 2
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, cfg.Namespace, cfg.Name,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: cfg.Identity})
	if err != nil {
		return nil, err
	}
	e := &elector{cfg: *cfg, kube: kube, lock: lock}
	// Checks the durations against each other the way Run will.
	if _, err := leaderelection.NewLeaderElector(e.config(nil)); err != nil {
		return nil, err
	}
	return e, nil
}

// config is one term's election; leading receives the term's context when
// the lease is acquired.
func (e *elector) config(leading chan<- context.Context) leaderelection.LeaderElectionConfig {
	return leaderelection.LeaderElectionConfig{
		Lock:          e.lock,
		Name:          e.cfg.Name,
		LeaseDuration: e.cfg.LeaseDuration,
		RenewDeadline: e.cfg.RenewDeadline,
		RetryPeriod:   e.cfg.RetryPeriod,
		// runElected releases the lease itself, only after the work has
		// stopped, so that a standby takes over at once on a clean
		// shutdown without overlapping. Client-go's ReleaseOnCancel would
		// also release after a failed renewal, before it cancels the
		// work, which then outlives the renew deadline by the release's
		// own calls.
		ReleaseOnCancel: false,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { leading <- ctx },
			OnStoppedLeading: func() {},
		},
	}
}

// runElected campaigns, works while it leads, and campaigns again after it
// lost the lease, until ctx is done. Standing by again rather than exiting
// keeps a pair of agents a pair after a blip of the kube-apiserver, with
// no supervisor needed to restart the loser.
func (a *Agent) runElected(ctx context.Context) {
	// The election logs through the agent's logger (client-go takes it
	// from the context).
	logged := logr.NewContext(context.WithoutCancel(ctx), logr.FromSlogHandler(a.log.Handler()))
	for ctx.Err() == nil {
		a.ensureLeaseNamespace(ctx)
		leading := make(chan context.Context, 1)
		le, err := leaderelection.NewLeaderElector(a.elect.config(leading))
		if err != nil { // New checked the same configuration
			a.log.Error("leader election", "error", err)
			return
		}
		// The election outlives ctx until the work has stopped: only then
		// is the lease released.
		electCtx, stopElection := context.WithCancel(logged)
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			le.Run(electCtx)
		}()
		led := false
		select {
		case term := <-leading:
			led = true
			a.log.Info("leading", "identity", a.cfg.LeaderElection.Identity)
			termCtx, endTerm := context.WithCancel(term)
			stop := context.AfterFunc(ctx, endTerm)
			a.lead(termCtx)
			stop()
			endTerm()
			if ctx.Err() == nil {
				a.log.Warn("lost the leader lease; stopped working, standing by", "identity", a.cfg.LeaderElection.Identity)
			}
		case <-ctx.Done():
		}
		stopElection()
		<-ended
		if led && ctx.Err() != nil {
			if err := a.elect.release(logged); err != nil {
				a.log.Warn("cannot release the leader lease; a standby takes over once it expires", "error", err)
			}
		}
	}
}

// release gives the lease up as client-go's own release does (no holder,
// a lease of one second), so that a standby takes over at once; a lease
// another agent holds by now is left alone.
func (e *elector) release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	rec, _, err := e.lock.Get(ctx)
	if err != nil {
		return err
	}
	if rec.HolderIdentity != e.lock.Identity() {
		return nil
	}
	now := metav1.NewTime(time.Now())
	return e.lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now})
}

// ensureLeaseNamespace creates the Lease's namespace when it is missing,
// retrying until it exists or ctx is done. An agent not allowed to read
// namespaces goes on: the Lease calls will say whether it can elect.
func (a *Agent) ensureLeaseNamespace(ctx context.Context) {
	_ = reconcile.Retry(ctx, reconcile.Backoff(100*time.Millisecond, 5*time.Second), func(ctx context.Context, _ int) error {
		err := a.elect.ensureNamespace(ctx)
		switch {
		case err == nil || ctx.Err() != nil:
			return nil
		case apierrors.IsForbidden(err):
			a.log.Warn("cannot check the leader lease's namespace; going on", "error", err)
			return reconcile.Terminal(err)
		}
		a.log.Warn("leader lease namespace", "error", err)
		return err
	})
}

func (e *elector) ensureNamespace(ctx context.Context) error {
	namespaces := e.kube.CoreV1().Namespaces()
	_, err := namespaces.Get(ctx, e.cfg.Namespace, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	_, err = namespaces.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.cfg.Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", e.cfg.Namespace, err)
	}
	return nil
}
