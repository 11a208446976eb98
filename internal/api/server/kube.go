package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/feed"
	"github.com/purser-io/purser/internal/api/kubeapi"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/guard"
	"github.com/purser-io/purser/internal/hub/store"
)

// mountKube serves the Kubernetes-shaped read API over the inventory
// (internal/api/kubeapi) under /k8s, authenticated and rate-limited as
// every other request; its watches share one feed of the inventory's
// changes.
func (s *Server) mountKube() {
	reloads := func() int64 { return 0 }
	if s.cfg.Identities != nil {
		reloads = s.cfg.Identities.Reloads
	}
	s.feed = feed.New(feed.Config{Store: s.cfg.Store, Changes: s.cfg.InventoryChanges, Logger: s.log})
	// The watches of purser's own kinds follow their change sequence,
	// which the feed numbers as it polls (store.OwnFeed).
	s.ownFeed = feed.NewOwn(feed.Config{Logger: s.log}, s.cfg.Store)
	s.kube = kubeapi.New(kubeapi.Config{
		Store: s.cfg.Store, Feed: s.feed, Authenticate: s.authenticate, Policy: s.policy, Reloads: reloads,
		Freshness: func(u policy.User, f store.AgentFreshness, now time.Time) v1alpha1.Freshness {
			return *agentStatus(f, now, s.seesClusterDetail(u)).Freshness
		},
		Logger: s.log, Now: s.now,
		WatchesPerUser: s.cfg.Limits.KubeWatchesPerUser, RequestsPerUser: s.cfg.Limits.KubeRequestsPerUser,
		Own: s.kubeKinds(), Failure: kubeFailure, DryRun: withDryRun, InTx: withTxStep,
		OwnFeed: s.ownFeed, Number: func(ctx context.Context) error { return feed.Number(ctx, s.cfg.Store) },
		Policies: s.placementPoliciesFor,
	})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A request refused before its body is read has its connection
		// closed right after the answer, as the rest of the API does
		// (closeNow): otherwise net/http reads what is left of the body
		// first, and a client trickling bodies would hold a connection
		// and a goroutine per refused request until ReadTimeout, whatever
		// the caps say.
		tracked := &trackedBody{ReadCloser: r.Body}
		r.Body = tracked
		defer func() {
			if tracked.unread(r) {
				closeNow(w)
			}
		}()
		refused := func() { w.Header().Set("Connection", "close") }
		u, ok := s.authenticate(r)
		if !ok {
			refused()
			if allowed, wait := s.failed.allow(clientAddress(r), time.Now()); !allowed {
				kubeapi.TooManyRequests(w, wait, "too many requests without a valid token from this address; wait before trying again")
				return
			}
			kubeapi.Unauthorized(w)
			return
		}
		if allowed, wait := s.users.allow(u.Name, time.Now()); !allowed {
			refused()
			kubeapi.TooManyRequests(w, wait, "user "+u.Name+" sends more requests than the server's limit; wait before sending more")
			return
		}
		s.kube.Serve(w, r, u)
	})
	s.mux.Handle(kubeapi.Prefix, h)
	s.mux.Handle(kubeapi.Prefix+"/", h)
}

// kubeKinds are purser's kinds as /k8s serves them (purser.io/v1alpha1),
// each verb the REST API's own handler, so that a write through /k8s is
// authorized, admitted, approved, audited and bounded by the same code as
// the same write through /api/v1. A Quota is cluster-scoped there, named
// after its namespace, as the REST API names it; so is a Cluster.
func (s *Server) kubeKinds() []kubeapi.OwnKind {
	k := s.kubeHandler
	return []kubeapi.OwnKind{
		{Kind: v1alpha1.KindRunnable, Plural: "runnables", Singular: "runnable", ShortNames: []string{"rn"}, Namespaced: true,
			Object: v1alpha1.Runnable{}, Description: "Runnable is work that runs to its end on one member cluster at a time, placed, failed over and retried by purser.",
			Columns: []kubeapi.OwnColumn{
				{Name: "Phase", Type: "string", Path: []string{"status", "phase"}, Description: "Where the runnable is in its life."},
				{Name: "Cluster", Type: "string", Path: []string{"status", "cluster"}, Description: "The member cluster of its current attempt."},
				{Name: "Health", Type: "string", Path: []string{"status", "health"}, Description: "Its object's health there."},
				{Name: "Attempts", Type: "integer", Path: []string{"status", "attemptCount"}, Priority: 1, Description: "How many attempts it had."},
				{Name: "Message", Type: "string", Path: []string{"status", "message"}, Priority: 1, Description: "What purser says of it last."},
			},
			Get: k(s.getRunnable), List: k(s.listRunnables), Create: k(s.createRunnable), Update: k(s.updateRunnable),
			Delete: k(s.deleteRunnable), NeedsResourceVersion: true, MayWrite: s.mayWriteIn("runnables"), MayRead: s.mayReadIn("runnables"),
			Identity: func(ctx context.Context, tx *store.Tx, ns, name string) (string, error) {
				rec, err := tx.Runnables().Get(ctx, ns, name)
				if errors.Is(err, store.ErrNotFound) {
					return "", nil
				}
				if err != nil {
					return "", err
				}
				return rec.UID, nil
			}},
		{Kind: v1alpha1.KindDeployable, Plural: "deployables", Singular: "deployable", ShortNames: []string{"dp"}, Namespaced: true,
			Object: v1alpha1.Deployable{}, Description: "Deployable is an object kept on every member cluster its placement selects, rolled out in waves.",
			Columns: []kubeapi.OwnColumn{
				{Name: "Phase", Type: "string", Path: []string{"status", "phase"}, Description: "Active, or PendingApproval."},
				{Name: "Generation", Type: "integer", Path: []string{"status", "generation"}, Description: "The spec's generation in force."},
				{Name: "Rollout", Type: "string", Path: []string{"status", "rollout", "state"}, Priority: 1, Description: "Where its rollout is."},
			},
			Get: k(s.getDeployable), List: k(s.listDeployables), Update: k(s.putDeployable), Delete: k(s.deleteDeployable), MayWrite: s.mayWriteIn("deployables"),
			MayRead: s.mayReadIn("deployables"),
			Identity: func(ctx context.Context, tx *store.Tx, ns, name string) (string, error) {
				rec, err := tx.Deployables().Get(ctx, ns, name)
				if errors.Is(err, store.ErrNotFound) {
					return "", nil
				}
				if err != nil {
					return "", err
				}
				return rec.UID, nil
			}},
		{Kind: v1alpha1.KindQuota, Plural: "quotas", Singular: "quota",
			Object: v1alpha1.Quota{}, Description: "Quota bounds what the runnables of the namespace it is named after hold across the farm; admins set it.",
			Get: k(s.getQuota), List: k(s.listQuotas), Update: k(s.putQuota), Delete: k(s.deleteQuota),
			MayRead: s.mayReadIn("quotas"),
			MayWrite: func(u policy.User, _ string) error {
				if !s.policy().IsAdmin(u) {
					return errForbidden("user %q may not set or remove quotas; only admins may", u.Name)
				}
				return nil
			},
			// A quota has no uid: its creation time, to the second as
			// metadata.creationTimestamp shows it, tells one from another
			// of the same namespace made after a delete.
			Identity: func(ctx context.Context, tx *store.Tx, ns, _ string) (string, error) {
				rec, err := tx.Quotas().Get(ctx, ns)
				if errors.Is(err, store.ErrNotFound) {
					return "", nil
				}
				if err != nil {
					return "", err
				}
				return rec.CreatedAt.UTC().Format("2006-01-02T15:04:05Z"), nil
			}},
		s.policyKind(policyScope{}), s.policyKind(policyScope{cluster: true}),
		{Kind: v1alpha1.KindCluster, Plural: "clusters", Singular: "cluster",
			Object: v1alpha1.Cluster{}, Description: "Cluster is a member cluster registered with purser; only admins register, change and remove them.",
			Columns: []kubeapi.OwnColumn{
				{Name: "State", Type: "string", Path: []string{"status", "state"}, Description: "Ready, NotReady or Unknown."},
			},
			Get: k(s.getCluster), List: k(s.listClusters), Create: k(s.createCluster), Update: k(s.updateCluster), Delete: k(s.deleteCluster),
			MayWrite: func(u policy.User, _ string) error {
				if !s.policy().IsAdmin(u) {
					return errForbidden("user %q may not register, change or remove clusters; only admins may", u.Name)
				}
				return nil
			},
			Identity: func(ctx context.Context, tx *store.Tx, _, name string) (string, error) {
				rec, err := tx.Clusters().Get(ctx, name)
				if errors.Is(err, store.ErrNotFound) {
					return "", nil
				}
				if err != nil {
					return "", err
				}
				return rec.CreatedAt.UTC().Format("2006-01-02T15:04:05Z"), nil
			}},
	}
}

// mayWriteIn is the namespace rule of the handlers' writes of what
// (runnables, deployables), for /k8s to apply before it computes a patch
// or an apply.
func (s *Server) mayWriteIn(what string) func(policy.User, string) error {
	return func(u policy.User, ns string) error {
		if !s.policy().Allowed(u, ns, policy.VerbWrite) {
			return errForbidden("user %q may not change %s in namespace %q", u.Name, what, ns)
		}
		return nil
	}
}

// mayReadIn is the namespace rule of the handlers' reads of what, for a
// watch of /k8s to apply to a deletion, whose object Get no longer reads.
func (s *Server) mayReadIn(what string) func(policy.User, string) error {
	return func(u policy.User, ns string) error {
		if !s.policy().Allowed(u, ns, policy.VerbRead) {
			return errForbidden("user %q may not read %s in namespace %q", u.Name, what, ns)
		}
		return nil
	}
}

// KubeKinds are purser's kinds as /k8s describes them (names, schema,
// columns), without the handlers: what deploy/crds is made from
// (TestCRDsAreGenerated).
func KubeKinds() []kubeapi.OwnKind {
	kinds := (&Server{}).kubeKinds()
	for i := range kinds {
		k := &kinds[i]
		k.Get, k.List, k.Create, k.Update, k.Delete, k.MayWrite, k.MayRead, k.Identity = nil, nil, nil, nil, nil, nil, nil, nil
	}
	return kinds
}

// kubeHandler is what handle does around a handler that /k8s does not do
// already (it authenticates and limits the rate itself): a write is
// refused while the database's primary is out of reach, and runs to its
// end whether or not the client stays.
func (s *Server) kubeHandler(h apiHandler) kubeapi.Handler {
	return func(r *http.Request, u policy.User) (int, any, error) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := s.cfg.Guard.Err(); errors.Is(err, guard.ErrNoPrimary) {
				return 0, nil, errUnreached(err)
			}
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), writeTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		return h(r, u)
	}
}

// kubeFailure classifies a refusal of the REST API for /k8s, as
// writeError does for /api/v1.
func kubeFailure(err error) kubeapi.Failure {
	if f, ok := kubeapi.AsFailure(err); ok {
		return f
	}
	e := asAPIError(err)
	f := kubeapi.Failure{Code: e.Code, Reason: e.Reason, Message: e.Message, RetryAfter: retryAfter(err)}
	if e.Code == http.StatusServiceUnavailable && f.RetryAfter == "" {
		f.RetryAfter = strconv.Itoa(retryAfterSeconds)
	}
	for _, d := range e.Details {
		f.Fields = append(f.Fields, kubeapi.FieldCause{Field: d.Field, Message: d.Message})
	}
	return f
}

// dryRunKey marks a request's context as a dry run (dryRun=All through
// /k8s): tx rolls its transaction back instead of committing it.
type dryRunKey struct{}

var errDryRun = errors.New("dry run: rolled back")

func withDryRun(ctx context.Context) context.Context {
	return context.WithValue(ctx, dryRunKey{}, true)
}

func isDryRun(ctx context.Context) bool { return ctx.Value(dryRunKey{}) != nil }

// txStepKey carries a step /k8s adds to a write's transaction (kubeapi.InTx).
type txStepKey struct{}

func withTxStep(ctx context.Context, fn func(context.Context, *store.Tx) error) context.Context {
	return context.WithValue(ctx, txStepKey{}, fn)
}
