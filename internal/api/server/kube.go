package server

import (
	"net/http"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/feed"
	"github.com/purser-io/purser/internal/api/kubeapi"
	"github.com/purser-io/purser/internal/domain/policy"
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
	s.kube = kubeapi.New(kubeapi.Config{
		Store: s.cfg.Store, Feed: s.feed, Authenticate: s.authenticate, Policy: s.policy, Reloads: reloads,
		Freshness: func(u policy.User, f store.AgentFreshness, now time.Time) v1alpha1.Freshness {
			return *agentStatus(f, now, s.seesClusterDetail(u)).Freshness
		},
		Logger: s.log, Now: s.now,
		WatchesPerUser: s.cfg.Limits.KubeWatchesPerUser, RequestsPerUser: s.cfg.Limits.KubeRequestsPerUser,
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
