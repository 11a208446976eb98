// Package kubeapi is the Kubernetes-shaped read API over the inventory
// (docs/api.md, "The Kubernetes API of the farm"): under /k8s (every
// cluster) and /k8s/clusters/{cluster} (one) it answers discovery, list,
// get and watch as a kube-apiserver does, from the database alone, so that
// kubectl, client-go informers and other Kubernetes tools read the whole
// farm, and keep reading it while a member cluster is down. The
// inventory's kinds are read-only: a write is refused with a pointer to
// purser's own API. Purser's own kinds (purser.io/v1alpha1, own.go) are
// read and written here through the REST API's handlers, so that kubectl
// writes them by the same code as /api/v1.
// Watches are served from one shared feed of the inventory's change
// sequence (internal/api/feed), whose numbers are the resourceVersions;
// watches of purser's own kinds from another, of their own change
// sequence (ownwatch.go).
package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/feed"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// Prefix is where the API is served; PrefixCluster+{cluster} serves one
// cluster's part of it.
const (
	Prefix        = "/k8s"
	PrefixCluster = "/k8s/clusters/"
)

// Annotations purser adds to every object it serves.
const (
	// ClusterAnnotation names the member cluster the object is in.
	ClusterAnnotation = "purser.io/cluster"
	// ClusterResourceVersionAnnotation keeps the object's resourceVersion
	// in its own cluster; metadata.resourceVersion is purser's.
	ClusterResourceVersionAnnotation = "purser.io/cluster-resource-version"
)

// Reader is the database as the API reads it.
type Reader interface {
	Read(ctx context.Context, fn func(*store.Tx) error) error
}

// Config holds the API's dependencies.
type Config struct {
	Store Reader
	Feed  *feed.Feed[store.InventoryChange]
	// Authenticate names the request's user (the server's tokens and
	// OIDC), false when it has no valid credential.
	Authenticate func(r *http.Request) (policy.User, bool)
	// Policy is the policy in force, read once per decision.
	Policy func() *policy.Policy
	// Reloads counts the reloads of the tokens and policy files, so that
	// an open watch knows when to authorize again; nil: never reloaded.
	Reloads func() int64
	// Freshness judges a cluster's records by its agent's reports (the
	// rule the clusters API serves), in the words the user may read: a
	// tenant is not told the agent's transport error, which names the
	// member's API address.
	Freshness func(policy.User, store.AgentFreshness, time.Time) v1alpha1.Freshness
	Logger    *slog.Logger     // nil: discarded
	Now       func() time.Time // nil: time.Now
	// BookmarkInterval is how often an open watch that asked for
	// bookmarks gets one: 10s.
	BookmarkInterval time.Duration
	// WatchTimeout bounds a watch (lengthened at random by up to as much
	// again), as the kube-apiserver's --min-request-timeout does: 30 min.
	WatchTimeout time.Duration
	// WatchesPerUser caps the watches one user holds open at once
	// (DefaultWatchesPerUser); RequestsPerUser, the user's other
	// requests under way at once (DefaultRequestsPerUser). Past either
	// the answer is 429 with Retry-After and a Status naming the cap.
	WatchesPerUser  int
	RequestsPerUser int

	// Own are purser's kinds, served under purser.io/v1alpha1 by the
	// REST API's handlers (own.go); Failure classifies their refusals as
	// the REST API does; DryRun marks a request's context so that the
	// REST API's transaction is rolled back rather than committed
	// (dryRun=All). Nil: purser's kinds are not served.
	Own     []OwnKind
	Failure func(error) Failure
	DryRun  func(context.Context) context.Context
	// OwnFeed is the change sequence of purser's own kinds, which their
	// watches follow; Number numbers what was committed of it
	// (feed.Number), so that a list's resourceVersion is current. Nil:
	// purser's kinds are not watched.
	OwnFeed *feed.Feed[store.OwnChange]
	Number  func(context.Context) error
	// Policies reads the placement policies that may select a native
	// object written to /k8s (native.go), whose runnable the Runnable
	// kind of Own writes. Nil: native objects are read-only, the
	// inventory's.
	Policies Policies
	// InTx adds a step to the REST API's transaction of a write: the
	// server-side apply record (apply.go). Nil: server-side apply is not
	// served.
	InTx InTx
}

// API is the handler of /k8s.
type API struct {
	cfg   Config
	log   *slog.Logger
	now   func() time.Time
	kinds *catalogues
	// watches and requests count what each user holds open.
	watches, requests *perUser
	// managers are server-side apply's field managers of purser's kinds;
	// nativeManagers, of the native kinds, by GroupVersionKind.
	managers       managers
	nativeManagers sync.Map
}

// New returns the API.
func New(cfg Config) *API {
	a := &API{cfg: cfg, log: cfg.Logger, now: cfg.Now}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.cfg.BookmarkInterval <= 0 {
		a.cfg.BookmarkInterval = 10 * time.Second
	}
	if a.cfg.WatchTimeout <= 0 {
		a.cfg.WatchTimeout = 30 * time.Minute
	}
	if a.cfg.WatchesPerUser <= 0 {
		a.cfg.WatchesPerUser = DefaultWatchesPerUser
	}
	if a.cfg.RequestsPerUser <= 0 {
		a.cfg.RequestsPerUser = DefaultRequestsPerUser
	}
	a.watches, a.requests = newPerUser(a.cfg.WatchesPerUser), newPerUser(a.cfg.RequestsPerUser)
	if a.cfg.Reloads == nil {
		a.cfg.Reloads = func() int64 { return 0 }
	}
	a.kinds = &catalogues{s: cfg.Store, ttl: catalogueTTL}
	for i := range a.cfg.Own {
		a.kinds.own = append(a.kinds.own, a.cfg.Own[i].resource())
	}
	return a
}

// request is one call, parsed.
type request struct {
	r       *http.Request
	user    policy.User
	cluster string // "" for every cluster
	// base is the path the cluster's API is served at.
	base string
	rest []string // path segments after base
}

// ServeHTTP authenticates a request under /k8s and serves it.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u, ok := a.cfg.Authenticate(r)
	if !ok {
		Unauthorized(w)
		return
	}
	a.Serve(w, r, u)
}

// Unauthorized answers a request without a valid credential.
func Unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="purser"`)
	writeStatus(w, statusErr(http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized"))
}

// TooManyRequests answers a request past the user's rate.
func TooManyRequests(w http.ResponseWriter, wait time.Duration, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(wait.Seconds()+0.999))))
	writeStatus(w, statusErr(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, msg))
}

// Serve serves a request under /k8s of the authenticated user u.
func (a *API) Serve(w http.ResponseWriter, r *http.Request, u policy.User) {
	req := &request{r: r, user: u, base: Prefix}
	path := strings.TrimPrefix(r.URL.Path, Prefix)
	if rest, ok := strings.CutPrefix(r.URL.Path, PrefixCluster); ok {
		name, after, _ := strings.Cut(rest, "/")
		if name == "" {
			writeStatus(w, statusErr(http.StatusNotFound, metav1.StatusReasonNotFound, "the path names no cluster: "+PrefixCluster+"{cluster}/..."))
			return
		}
		req.cluster, req.base, path = name, PrefixCluster+name, "/"+after
	}
	for _, s := range strings.Split(strings.Trim(path, "/"), "/") {
		if s != "" {
			req.rest = append(req.rest, s)
		}
	}
	// A watch is held open for long and counted by the watch cap alone
	// (watch); every other request is short and counted here while it
	// is under way.
	if !isTrue(r.URL.Query().Get("watch")) {
		release, held, ok := a.requests.acquire(u.Name)
		if !ok {
			// Refused before its body is read: the connection closes
			// after the answer (the server's closeNow), so that a refused
			// request holds nothing.
			w.Header().Set("Connection", "close")
			writeStatus(w, tooMany(w, requestRetry, "user %s has %d requests under way under %s, the most one user may have at once (%d); wait for one to finish",
				u.Name, held, Prefix, a.cfg.RequestsPerUser))
			return
		}
		defer release()
	}
	if err := a.route(w, req); err != nil {
		writeStatus(w, err)
	}
}

func (a *API) route(w http.ResponseWriter, req *request) error {
	r, p := req.r, req.rest
	if len(p) >= 4 && p[0] == "apis" && p[1] == "authorization.k8s.io" && r.Method == http.MethodPost {
		return a.review(w, req)
	}
	if len(p) >= 2 && p[0] == "openapi" && p[1] == "v3" && r.Method == http.MethodGet {
		return a.serveOpenAPI(w, req)
	}
	if ownPrefix(p) && len(p) > 3 && len(a.cfg.Own) > 0 {
		return a.serveOwn(w, req, p[3:])
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !a.nativeWrites(req) {
		// Refused before the body is read: the connection closes after
		// the answer, and says so, so that the client opens another.
		w.Header().Set("Connection", "close")
		w.Header().Set("Allow", "GET, HEAD")
		return statusErr(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			"the farm's Kubernetes API (/k8s) is read-only: "+r.Method+" is not served; change what runs on member clusters through purser's API, /api/v1 (runnables, deployables: `purser apply -f`)")
	}
	switch {
	case len(p) == 0:
		return writeJSON(w, http.StatusOK, map[string][]string{"paths": {req.base + "/api", req.base + "/api/v1", req.base + "/apis", req.base + "/version"}})
	case len(p) == 1 && p[0] == "version":
		return writeJSON(w, http.StatusOK, kubeVersion())
	case p[0] == "api":
		if len(p) == 1 {
			return a.discoverCore(w, req)
		}
		if p[1] != "v1" {
			return notFound(req)
		}
		if len(p) == 2 {
			return a.resourceList(w, req, "", "v1")
		}
		return a.serveResource(w, req, "", "v1", p[2:])
	case p[0] == "apis":
		switch len(p) {
		case 1:
			return a.discoverGroups(w, req)
		case 2:
			return a.groupInfo(w, req, p[1])
		case 3:
			return a.resourceList(w, req, p[1], p[2])
		}
		return a.serveResource(w, req, p[1], p[2], p[3:])
	}
	return notFound(req)
}

// nativeWrites says whether req may be a write of a native object:
// served on the farm-wide /k8s when placement policies are configured.
func (a *API) nativeWrites(req *request) bool {
	return a.cfg.Policies != nil && req.cluster == "" && a.ownKind("runnables") != nil
}

// serveResource serves what follows a group version: [namespaces/NS/]RESOURCE[/NAME].
func (a *API) serveResource(w http.ResponseWriter, req *request, group, gv string, p []string) error {
	ns := ""
	if len(p) >= 3 && p[0] == "namespaces" {
		ns, p = p[1], p[2:]
	}
	if len(p) == 0 || len(p) > 2 {
		return notFound(req)
	}
	cat, err := a.kinds.get(req.r.Context(), req.cluster)
	if err != nil {
		return err
	}
	res := cat.byResource(group, gv, p[0])
	if res == nil {
		gr := p[0]
		if group != "" {
			gr += "." + group
		}
		return statusErr(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource ("+gr+"): the inventory tracks no such kind"+clusterPhrase(req.cluster))
	}
	if ns != "" && !res.namespaced {
		return notFound(req)
	}
	name := ""
	if len(p) == 2 {
		name = p[1]
	}
	if handled, err := a.serveNative(w, req, res, ns, name); handled || err != nil {
		return err
	}
	if req.r.Method != http.MethodGet && req.r.Method != http.MethodHead {
		w.Header().Set("Connection", "close") // refused before the body is read
		w.Header().Set("Allow", "GET, HEAD")
		return statusErr(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			fmt.Sprintf("%s is not served on %s: a native object is written in a namespace of the farm-wide /k8s, where a placement policy makes it a runnable; the rest of the inventory is read-only", req.r.Method, req.r.URL.Path))
	}
	q := sel{res: res, cluster: req.cluster, namespace: ns}
	if len(p) == 2 {
		q.name = p[1]
		return a.get(w, req, q)
	}
	if isTrue(req.r.URL.Query().Get("watch")) {
		return a.watch(w, req, q)
	}
	return a.list(w, req, q)
}

func clusterPhrase(cluster string) string {
	if cluster == "" {
		return ""
	}
	return " in cluster " + cluster
}

func notFound(req *request) error {
	return statusErr(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource: "+req.r.URL.Path)
}

func isTrue(v string) bool { return v == "true" || v == "1" }

// kubeVersion is the Kubernetes version whose API purser serves: that of
// the apimachinery it is built with (v0.X.Y is Kubernetes v1.X.Y).
func kubeVersion() version.Info {
	info := version.Info{Major: "1", GitVersion: "v1.0.0+purser", Platform: "purser"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path != "k8s.io/apimachinery" || !strings.HasPrefix(m.Version, "v0.") {
				continue
			}
			parts := strings.SplitN(strings.TrimPrefix(m.Version, "v0."), ".", 2)
			info.Minor = parts[0]
			patch := "0"
			if len(parts) == 2 {
				patch = parts[1]
			}
			info.GitVersion = "v1." + parts[0] + "." + patch + "+purser"
		}
	}
	return info
}

// statusError is an answer of the Kubernetes shape: a metav1.Status.
type statusError struct{ st metav1.Status }

func (e *statusError) Error() string { return e.st.Message }

func statusErr(code int, reason metav1.StatusReason, msg string) error {
	return newStatus(code, reason, msg)
}

func newStatus(code int, reason metav1.StatusReason, msg string) *statusError {
	return &statusError{st: metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code)}}
}

func forbidden(msg string) error {
	return statusErr(http.StatusForbidden, metav1.StatusReasonForbidden, msg)
}

func badRequest(msg string) error {
	return statusErr(http.StatusBadRequest, metav1.StatusReasonBadRequest, msg)
}

func writeStatus(w http.ResponseWriter, err error) {
	var se *statusError
	if !errors.As(err, &se) {
		se = newStatus(http.StatusInternalServerError, metav1.StatusReasonInternalError, "reading the inventory failed: "+err.Error())
		if errors.Is(err, store.ErrBadContinue) {
			se = newStatus(http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		}
	}
	_ = writeJSON(w, int(se.st.Code), se.st)
	// Sent now: a refusal made before the request's body was read is
	// followed by closing the connection (the server's closeNow), which
	// would drop what is still buffered.
	_ = http.NewResponseController(w).Flush()
}

func writeJSON(w http.ResponseWriter, code int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	// With its length, an answer followed by closing the connection
	// (closeNow) reaches the client whole, not as a chunked body cut off.
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b)
	return nil
}
