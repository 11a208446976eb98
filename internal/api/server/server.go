// Package server is purser's REST API (docs/api.md): it authenticates and
// authorizes each request, validates what it is given, and writes every
// change together with its audit entry and, where work must move, an outbox
// row, in one database transaction. Reads come from the database only; the
// server never talks to a member cluster.
package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/api/feed"
	"github.com/purser-io/purser/internal/api/kubeapi"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/guard"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/web"
)

// MaxBodyBytes is the largest request body accepted (413 above it).
const MaxBodyBytes = 1 << 20

// Checker is something /readyz depends on.
type Checker interface {
	Ready(ctx context.Context) error
}

// Notifier is woken after a commit that wrote outbox rows, so that the
// relay publishes them without waiting for its next poll.
type Notifier interface {
	Notify()
}

// Store is the database as the server uses it: its transactions, the
// readiness probe's ping and the audit chain's verification.
type Store interface {
	store.Transactor
	Ping(ctx context.Context) error
	VerifyAuditAnchored(ctx context.Context, anchors []audit.Anchor) (store.VerifyResult, error)
}

// Config holds the server's dependencies.
type Config struct {
	Store  Store
	Stream Checker // nil: /readyz checks the database only
	// InventoryChanges wakes the watches' feed when the ingester commits
	// (*stream.Client); nil: the feed polls only.
	InventoryChanges feed.Changes
	// Anchors keeps the record of the audit chain's heads outside the
	// database (*anchor.Publisher); nil: the chain is verified on its own.
	Anchors AnchorRecord
	Outbox  Notifier
	// ScheduleWritten, when set, is called after a schedule was written
	// or deleted: it wakes a scheduler of the same process at once.
	ScheduleWritten func()
	// Identities authenticates and authorizes, reloading the tokens and
	// policy files as they change and accepting the OIDC provider's ID
	// tokens; nil: Tokens and Policy, fixed.
	Identities *auth.Identities
	Tokens     *auth.Authenticator
	Policy     *policy.Policy
	// ReservedServiceAccounts are the service accounts purser's own
	// components run as in member clusters, which no tenant's pod may
	// name; nil: admission.ReservedServiceAccounts.
	ReservedServiceAccounts []string
	Sealer                  *seal.Sealer
	Logger                  *slog.Logger
	Registry                *prometheus.Registry // metrics are registered here; nil: a new one
	Now                     func() time.Time     // nil: time.Now
	// Guard, when set, refuses every write (503, Retry-After) while this
	// replica does not reach the database's primary, and /readyz fails
	// while it does not reach the primary or the stream's quorum; reads
	// are still answered, from a standby if the store has one, with their
	// freshness.
	Guard *guard.Guard
	// Commits, when set, commits the API's changes in groups
	// (store.GroupCommit), so that a commit's round trip to a synchronous
	// standby in another DC is paid once per group, not per change.
	Commits *store.GroupCommit
	// Limits bound request rates and watches; the zero value means the
	// defaults.
	Limits Limits
	// DrillSnapshot reads the farm as the drills' what-if weighs it;
	// nil: drills are answered 503, not configured.
	DrillSnapshot DrillSnapshot
}

// Server is the HTTP API.
type Server struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	mux     *http.ServeMux
	metrics *metrics
	// users limits each user's requests; failed, each client address's
	// requests without a valid token.
	users, failed *limiterSet
	watches       *watchHub
	pods          *admission.Checker                // judges the pods of every template
	feed          *feed.Feed[store.InventoryChange] // the inventory's changes, for every /k8s watch
	ownFeed       *feed.Feed[store.OwnChange]       // the changes of purser's own kinds, for their watches
	kube          *kubeapi.API

	// webhooks limits each trigger's webhook calls.
	webhooks *limiterSet
	// dcs keeps the DC list's headroom for a while (drills.go).
	dcs dcCache
}

// apiFallback is the pattern that answers API paths no route serves.
const apiFallback = "/api/"

// New returns the API as an http.Handler.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, log: cfg.Logger, now: cfg.Now, mux: http.NewServeMux()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.pods = admission.DefaultChecker()
	if cfg.ReservedServiceAccounts != nil {
		var err error
		if s.pods, err = admission.NewChecker(cfg.ReservedServiceAccounts...); err != nil {
			panic(err) // the library's own checks, fixed when the binary is built
		}
	}
	if s.now == nil {
		s.now = time.Now
	}
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s.metrics = newMetrics(reg)
	lim := cfg.Limits.withDefaults()
	s.users = newLimiterSet(lim.UserRate, lim.UserBurst, maxLimiterKeys)
	s.failed = newLimiterSet(lim.FailedAuthRate, lim.FailedAuthBurst, maxLimiterKeys)
	s.webhooks = newLimiterSet(WebhookRate, WebhookBurst, maxLimiterKeys)
	s.watches = newWatchHub(s, lim.WatchesPerUser, lim.Watches, lim.WatchTimeout)
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "purser_api_inventory_watches", Help: "Inventory watches open."},
			func() float64 { return float64(s.watches.counts().watches) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "purser_api_inventory_watch_polls", Help: "Distinct selections the inventory watches poll; identical selections share one."},
			func() float64 { return float64(s.watches.counts().polls) }))
	if cfg.Identities != nil {
		registerIdentityMetrics(reg, cfg.Identities)
	}
	if cfg.DrillSnapshot != nil {
		reg.MustRegister(dcCollector{s})
	}

	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	s.handle("POST /api/v1/runnables", s.createRunnable)
	s.handle("GET /api/v1/runnables", s.listRunnables)
	s.handle("GET /api/v1/runnables/{namespace}/{name}", s.getRunnable)
	s.handle("DELETE /api/v1/runnables/{namespace}/{name}", s.deleteRunnable)
	s.handle("PUT /api/v1/runnables/{namespace}/{name}", s.updateRunnable)
	s.handle("POST /api/v1/runnables/{namespace}/{name}/failover", s.confirmStopped)
	s.handle("POST /api/v1/runnables/{namespace}/{name}/approve", s.decideRunnable(true))
	s.handle("POST /api/v1/runnables/{namespace}/{name}/reject", s.decideRunnable(false))
	s.handle("POST /api/v1/runnables/{namespace}/{name}/suspend", s.suspendRunnable)
	s.handle("POST /api/v1/runnables/{namespace}/{name}/resume", s.resumeRunnable)
	s.handle("POST /api/v1/runnables/{namespace}/{name}/rerun", s.rerunRunnable)
	s.handle("POST /api/v1/runnables/{namespace}/{name}/move", s.moveRunnable)

	s.handle("PUT /api/v1/deployables/{namespace}/{name}", s.putDeployable)
	s.handle("GET /api/v1/deployables", s.listDeployables)
	s.handle("GET /api/v1/deployables/{namespace}/{name}", s.getDeployable)
	s.handle("DELETE /api/v1/deployables/{namespace}/{name}", s.deleteDeployable)
	s.handle("POST /api/v1/deployables/{namespace}/{name}/approve", s.decideDeployable(true))
	s.handle("POST /api/v1/deployables/{namespace}/{name}/reject", s.decideDeployable(false))
	s.handle("POST /api/v1/deployables/{namespace}/{name}/pause", s.controlRollout(pauseRollout))
	s.handle("POST /api/v1/deployables/{namespace}/{name}/resume", s.controlRollout(resumeRollout))
	s.handle("POST /api/v1/deployables/{namespace}/{name}/rollback", s.controlRollout(rollbackRollout))
	s.handle("POST /api/v1/deployables/{namespace}/{name}/diff", s.diffDeployable)

	s.handle("POST /api/v1/clusters", s.createCluster)
	s.handle("GET /api/v1/clusters", s.listClusters)
	s.handle("GET /api/v1/clusters/{name}", s.getCluster)
	s.handle("PUT /api/v1/clusters/{name}", s.updateCluster)
	s.handle("DELETE /api/v1/clusters/{name}", s.deleteCluster)

	s.handle("PUT /api/v1/quotas/{namespace}", s.putQuota)
	s.handle("GET /api/v1/quotas", s.listQuotas)
	s.handle("GET /api/v1/quotas/{namespace}", s.getQuota)
	s.handle("DELETE /api/v1/quotas/{namespace}", s.deleteQuota)

	s.handle("PUT /api/v1/schedules/{namespace}/{name}", s.putSchedule)
	s.handle("GET /api/v1/schedules", s.listSchedules)
	s.handle("GET /api/v1/schedules/{namespace}/{name}", s.getSchedule)
	s.handle("DELETE /api/v1/schedules/{namespace}/{name}", s.deleteSchedule)
	s.handle("POST /api/v1/schedules/{namespace}/{name}/run", s.runSchedule)
	s.handle("POST /api/v1/schedules/{namespace}/{name}/backfill", s.backfillSchedule)

	s.handle("PUT /api/v1/triggers/{namespace}/{name}", s.putTrigger)
	s.handle("GET /api/v1/triggers", s.listTriggers)
	s.handle("GET /api/v1/triggers/{namespace}/{name}", s.getTrigger)
	s.handle("DELETE /api/v1/triggers/{namespace}/{name}", s.deleteTrigger)
	s.handle("POST /api/v1/triggers/{namespace}/{name}/rotate-token", s.rotateTriggerToken)
	s.mux.HandleFunc("POST /api/v1/triggers/{namespace}/{name}/webhook", s.webhook)

	for _, p := range []policyScope{{}, {cluster: true}} {
		path := "/api/v1/placementpolicies"
		item := path + "/{namespace}/{name}"
		if p.cluster {
			path = "/api/v1/clusterplacementpolicies"
			item = path + "/{name}"
		}
		s.handle("PUT "+item, s.putPlacementPolicy(p))
		s.handle("GET "+path, s.listPlacementPolicies(p))
		s.handle("GET "+item, s.getPlacementPolicy(p))
		s.handle("DELETE "+item, s.deletePlacementPolicy(p))
	}

	s.handle("POST /api/v1/drills", s.createDrill)
	s.handle("GET /api/v1/drills", s.listDrills)
	s.handle("GET /api/v1/drills/{id}", s.getDrill)
	s.handle("POST /api/v1/drills/{id}/end", s.endDrill)
	s.handle("GET /api/v1/dcs", s.listDCs)

	s.handle("GET /api/v1/inventory", s.listInventory)
	s.mountKube()
	s.handle("GET /api/v1/whoami", s.whoami)
	s.mux.HandleFunc("GET /api/v1/auth/config", s.authConfig)
	s.mux.HandleFunc("POST /api/v1/auth/token", s.exchangeCode)
	s.handle("GET /api/v1/history", s.listHistory)
	s.handle("GET /api/v1/history/verify", s.verifyHistory)
	s.handle("POST /api/v1/history/anchors/restart", s.restartAnchors)

	// The console: static files that call this API with the user's token.
	console := http.FileServerFS(web.Static())
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		console.ServeHTTP(w, r)
	})
	s.mux.HandleFunc(apiFallback, func(w http.ResponseWriter, r *http.Request) {
		if allowed := s.methodsOf(r); len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			w.Header().Set("Connection", "close") // the body is not read
			writeError(w, errMethodNotAllowed(r, allowed))
			return
		}
		writeError(w, errNotFound("no such API path: %s %s", r.Method, r.URL.Path))
	})
	return s
}

// ServeHTTP counts and times every request by route.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	securityHeaders(w.Header(), strings.HasPrefix(r.URL.Path, "/api/"))
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	s.mux.ServeHTTP(rec, r)
	_, pattern := s.mux.Handler(r)
	if pattern == "" {
		pattern = "unmatched"
	}
	s.metrics.observe(pattern, rec.status, time.Since(start))
}

// apiHandler is an API endpoint: it gets the authenticated user and
// returns the response body and status, or an error that becomes the
// API's error body.
type apiHandler func(r *http.Request, u policy.User) (status int, body any, err error)

// streamFunc is a body that writes itself, for streaming answers (watch).
// An error it returns before writing anything becomes an error answer.
type streamFunc func(w http.ResponseWriter) error

func (s *Server) handle(pattern string, h apiHandler) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		// Refused before the body is read: the connection closes rather
		// than wait for the rest of a body nobody reads (trackedBody).
		early := func(err error) {
			w.Header().Set("Connection", "close")
			writeError(w, err)
			if r.ContentLength != 0 {
				closeNow(w)
			}
		}
		tooEarly := func(err error) { // an authenticated client: the read timeout bounds the rest
			w.Header().Set("Connection", "close")
			writeError(w, err)
		}
		u, ok := s.authenticate(r)
		if !ok {
			if allowed, wait := s.failed.allow(clientAddress(r), time.Now()); !allowed {
				early(errTooManyRequests(wait, "too many requests without a valid token from this address; wait before trying again"))
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="purser"`)
			early(errUnauthorized())
			return
		}
		if allowed, wait := s.users.allow(u.Name, time.Now()); !allowed {
			early(errTooManyRequests(wait, "user %q sends more requests than the server's limit; wait before sending more", u.Name))
			return
		}
		tracked := &trackedBody{ReadCloser: http.MaxBytesReader(w, r.Body, MaxBodyBytes)}
		r.Body = tracked
		// A write goes to the database alone (the outbox carries it to
		// the stream later), so only the primary must be reached for it:
		// the API accepts writes through an outage of the stream.
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := s.cfg.Guard.Err(); errors.Is(err, guard.ErrNoPrimary) {
				early(errUnreached(err))
				return
			}
			// A client that goes away does not cut its write short: the
			// write finishes or fails on its own (and, in a group, never
			// cuts the group's other writes short).
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), writeTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		ctx, read := store.WithReadInfo(r.Context())
		r = r.WithContext(ctx)
		status, body, err := h(r, u)
		setFreshness(w.Header(), read)
		if stream, ok := body.(streamFunc); ok && err == nil {
			err = stream(w)
			if err == nil {
				return
			}
		}
		if err != nil {
			if apiErr := asAPIError(err); apiErr.Code >= 500 {
				s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "user", u.Name, "err", err)
			}
			if tracked.unread(r) {
				// Answered without reading the whole body (a 403 before
				// the decode, a 415, a body too slow): close rather than
				// keep the connection for another request.
				tooEarly(err)
				return
			}
			writeError(w, err)
			return
		}
		writeJSON(w, status, body)
	})
}

func (s *Server) authenticate(r *http.Request) (policy.User, bool) {
	const scheme = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return policy.User{}, false
	}
	token := strings.TrimSpace(h[len(scheme):])
	switch {
	case s.cfg.Identities != nil:
		return s.cfg.Identities.Authenticate(r.Context(), token)
	case s.cfg.Tokens != nil:
		return s.cfg.Tokens.Authenticate(token)
	}
	return policy.User{}, false
}

// policy is the policy in force: read it once per decision, never keep it,
// since the policy file is reloaded when it changes.
func (s *Server) policy() *policy.Policy {
	if s.cfg.Identities != nil {
		return s.cfg.Identities.Policy()
	}
	return s.cfg.Policy
}

// tx runs fn, a change and its audit entry, in a transaction of its own
// or of the next group.
func (s *Server) tx(ctx context.Context, fn func(tx *store.Tx) error) error {
	if step, ok := ctx.Value(txStepKey{}).(func(context.Context, *store.Tx) error); ok {
		// A step /k8s adds to the write (server-side apply's record of
		// who owns which field), committed with it or not at all.
		write := fn
		fn = func(tx *store.Tx) error {
			if err := write(tx); err != nil {
				return err
			}
			return step(ctx, tx)
		}
	}
	if isDryRun(ctx) {
		// Everything the write would do, checks and all, then rolled
		// back: a dry run through /k8s is the same code as the write.
		err := s.cfg.Store.Tx(ctx, func(tx *store.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			return errDryRun
		})
		if errors.Is(err, errDryRun) {
			return nil
		}
		return err
	}
	if s.cfg.Commits != nil {
		return s.cfg.Commits.Tx(ctx, fn)
	}
	return s.cfg.Store.Tx(ctx, fn)
}

// txFresh is tx for a request that names no version of its own (a
// DELETE, an operation's verb): when another writer, usually the
// controller recording what a cluster did, changed the runnable between
// fn's read and its write (store.ErrMoved), fn runs again on a fresh read,
// and decides again from what it finds. That write is no conflict of the
// user's; after movedRetries tries the conflict is answered.
func (s *Server) txFresh(ctx context.Context, fn func(tx *store.Tx) error) error {
	var err error
	for range movedRetries {
		if err = s.tx(ctx, fn); !errors.Is(err, store.ErrMoved) {
			return err
		}
	}
	return err
}

// movedRetries is how many times txFresh tries: the controller writes a
// runnable a few times in its life, rarely twice within one request.
const movedRetries = 5

// writeTimeout bounds a write once it is accepted for processing.
const writeTimeout = 30 * time.Second

// whoami tells a client who it is and what it may do, so that the console
// offers only that. The server still checks every request.
func (s *Server) whoami(_ *http.Request, u policy.User) (int, any, error) {
	return http.StatusOK, s.policy().AccessOf(u), nil
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 only when the database and the stream both answer,
// with each check's outcome to an administrator's token and only the
// verdict to anyone else.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{"database": "ok", "stream": "ok"}
	if s.cfg.Identities != nil {
		// Reported, not failed on: the last good files stay in force, and
		// taking every api out of service for a typo would be worse.
		checks["identities"] = "ok"
		if err := s.cfg.Identities.Problem(); err != nil {
			checks["identities"] = err.Error()
		}
	}
	ready := true
	if err := s.cfg.Store.Ping(ctx); err != nil {
		checks["database"] = err.Error()
		ready = false
	}
	if s.cfg.Stream != nil {
		if err := s.cfg.Stream.Ready(ctx); err != nil {
			checks["stream"] = err.Error()
			ready = false
		}
	} else {
		checks["stream"] = "not configured"
	}
	// Both may answer on the minority's side of a partition; the guard
	// knows whether a commit and the stream's quorum are reached.
	if err := s.cfg.Guard.Err(); err != nil {
		checks["hub"] = err.Error()
		ready = false
	}
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	// What failed (a file's path and parse error, the database's address)
	// is for those who run purser, not for whoever can reach the port:
	// load balancers and probes need only the code.
	if u, ok := s.authenticate(r); !ok || !s.policy().IsAdmin(u) {
		word := "ready"
		if !ready {
			word = "not ready"
		}
		writeJSON(w, status, map[string]string{"status": word})
		return
	}
	writeJSON(w, status, checks)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (deadlines
// of watches, closeNow).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush lets streaming responses (watch) through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purser_api_requests_total",
			Help: "API requests by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "purser_api_request_duration_seconds",
			Help:    "API request latency by route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route"}),
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}

func (m *metrics) observe(route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}
