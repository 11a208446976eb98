package server

import (
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits bound what one client can take of the API. The zero value means
// the defaults, which leave room for the design's 100 submissions a
// second from one automation user.
type Limits struct {
	// UserRate and UserBurst: requests a second each authenticated user
	// may make, and how many at once; default 200 and 400. Past them the
	// answer is 429 with Retry-After.
	UserRate  float64
	UserBurst int
	// FailedAuthRate and FailedAuthBurst: requests without a valid token
	// one client address may make; default one a second after ten. Each
	// costs a token hash, and guessing tokens should be slow.
	FailedAuthRate  float64
	FailedAuthBurst int
	// WatchesPerUser and Watches cap the inventory watches open at once,
	// per user and in all; default 8 and 256. A watch re-reads its
	// selection every second; identical selections share one read.
	WatchesPerUser int
	Watches        int
	// KubeWatchesPerUser and KubeRequestsPerUser cap, per user, the
	// watches open under /k8s and the other /k8s requests under way
	// (kubeapi.DefaultWatchesPerUser, kubeapi.DefaultRequestsPerUser).
	KubeWatchesPerUser  int
	KubeRequestsPerUser int
	// WatchTimeout is the shortest time a watch stays open; each ends
	// after a time drawn between it and twice it (as kube-apiserver's
	// --min-request-timeout), so that a client reconnects, is
	// authenticated and authorized again, and reconnections spread out;
	// default 30 minutes.
	WatchTimeout time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.UserRate <= 0 {
		l.UserRate = 200
	}
	if l.UserBurst <= 0 {
		l.UserBurst = 400
	}
	if l.FailedAuthRate <= 0 {
		l.FailedAuthRate = 1
	}
	if l.FailedAuthBurst <= 0 {
		l.FailedAuthBurst = 10
	}
	if l.WatchesPerUser <= 0 {
		l.WatchesPerUser = 8
	}
	if l.Watches <= 0 {
		l.Watches = 256
	}
	if l.WatchTimeout <= 0 {
		l.WatchTimeout = 30 * time.Minute
	}
	return l
}

// Timeouts of the HTTP server (ConfigureHTTPServer).
const (
	// ReadHeaderTimeout: the headers of a request.
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout: the headers and the body together (at most
	// MaxBodyBytes), so that a client trickling a body holds a connection
	// this long at most. Watches lift it once they stream.
	ReadTimeout = 30 * time.Second
	// WriteTimeout: from the end of the request's headers to the end of
	// the answer, so that a client that reads slowly holds a connection
	// this long at most. Generous: it includes the work of the answer,
	// and verifying a chain of millions of audit entries takes a while.
	// Watches lift it.
	WriteTimeout = 5 * time.Minute
	// IdleTimeout: a kept-alive connection between requests.
	IdleTimeout = 2 * time.Minute
	// MaxHeaderBytes: well above any real token or cookie.
	MaxHeaderBytes = 64 << 10
)

// ConfigureHTTPServer sets the timeouts and limits every server of the
// API must have. Without ReadTimeout a client that sends its headers and
// then a byte of body now and then holds a connection, and a goroutine,
// for as long as it likes.
func ConfigureHTTPServer(hs *http.Server) {
	hs.ReadHeaderTimeout = ReadHeaderTimeout
	hs.ReadTimeout = ReadTimeout
	hs.WriteTimeout = WriteTimeout
	hs.IdleTimeout = IdleTimeout
	hs.MaxHeaderBytes = MaxHeaderBytes
}

// limiterSet keeps one token bucket per key (a user, a client address).
// It holds at most maxKeys buckets: a bucket idle long enough to have
// refilled is the same as a new one and is forgotten first; past that,
// new keys share one bucket, so that memory stays bounded whatever
// arrives.
type limiterSet struct {
	limit   rate.Limit
	burst   int
	maxKeys int

	mu      sync.Mutex
	buckets map[string]*bucket
	shared  *rate.Limiter
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

func newLimiterSet(perSecond float64, burst, maxKeys int) *limiterSet {
	return &limiterSet{limit: rate.Limit(perSecond), burst: burst, maxKeys: maxKeys,
		buckets: map[string]*bucket{}, shared: rate.NewLimiter(rate.Limit(perSecond), burst)}
}

// allow takes a token for key, or says how long until one is there.
func (l *limiterSet) allow(key string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	lim := l.lookup(key, now)
	l.mu.Unlock()
	res := lim.ReserveN(now, 1)
	if !res.OK() {
		return false, time.Second
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

func (l *limiterSet) lookup(key string, now time.Time) *rate.Limiter {
	if b, ok := l.buckets[key]; ok {
		b.seen = now
		return b.lim
	}
	if len(l.buckets) >= l.maxKeys {
		refill := time.Duration(float64(l.burst) / float64(l.limit) * float64(time.Second))
		for k, b := range l.buckets {
			if now.Sub(b.seen) > refill {
				delete(l.buckets, k)
			}
		}
		if len(l.buckets) >= l.maxKeys {
			return l.shared
		}
	}
	b := &bucket{lim: rate.NewLimiter(l.limit, l.burst), seen: now}
	l.buckets[key] = b
	return b.lim
}

// maxLimiterKeys bounds each limiter set's memory (a few hundred bytes a
// key).
const maxLimiterKeys = 65536

// clientAddress is the address a request came from, without the port. A
// proxy in front of the API makes every client one address: rate limits
// of failed authentication then apply to the proxy, which is the safe
// side.
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// rateLimited is a 429 with the wait it asks for (Retry-After).
type rateLimited struct {
	status *APIError
	retry  time.Duration
}

func (e *rateLimited) Error() string { return e.status.Error() }
func (e *rateLimited) Unwrap() error { return e.status }

func errTooManyRequests(retry time.Duration, format string, args ...any) error {
	return &rateLimited{status: newError(http.StatusTooManyRequests, "TooManyRequests", format, args...), retry: retry}
}

// retryAfter is the Retry-After header err asks for, in whole seconds,
// or "".
func retryAfter(err error) string {
	var rl *rateLimited
	if !errors.As(err, &rl) {
		return ""
	}
	return strconv.Itoa(int(math.Ceil(max(rl.retry, time.Second).Seconds())))
}

// trackedBody records whether a request's body was read to its end, so
// that an answer given before (401, 403, 415, 429) closes the connection
// instead of reading what is left of it: net/http's server would
// otherwise read up to 256 KiB of an unread body before it sends the
// answer (chunkWriter.writeHeader, unless the answer says Connection:
// close), which a client trickling its body turns into a connection held
// until ReadTimeout.
type trackedBody struct {
	io.ReadCloser
	eof bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// unread reports whether the request still has body bytes on the wire.
func (b *trackedBody) unread(r *http.Request) bool {
	return r.ContentLength != 0 && !b.eof
}

// closeNow closes the connection of an answer given before its request's
// body was read, right after the answer, for a client not yet trusted
// (401, 429). Connection: close alone is not enough: net/http's server
// still reads what is left of a body under 256 KiB when the handler
// returns (body.Close, for a request that did not ask to close), so a
// client trickling its body would hold the connection and its goroutine
// until ReadTimeout. Hijacking after the answer is written flushes it
// first (response.Hijack). The connection is then closed as net/http
// closes one whose body it will not read (conn.closeWriteAndWait): the
// sending side first, the rest a moment later, so that a client still
// sending gets the answer rather than a reset. Over HTTP/2, where streams
// end on their own, Hijack fails and nothing more is needed.
func closeNow(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	if tcp, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = tcp.CloseWrite()
		time.AfterFunc(rstAvoidanceDelay, func() { conn.Close() })
		return
	}
	conn.Close()
}

// rstAvoidanceDelay is net/http's own wait between the two halves of
// closing a connection with unread data.
const rstAvoidanceDelay = 500 * time.Millisecond

// contentSecurityPolicy lets the console load its own script, styles and
// API, and nothing else: no inline script, no other origin, no framing.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// securityHeaders are sent with every answer; API answers are never
// cached, since they carry what a token may read.
func securityHeaders(h http.Header, api bool) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	if api {
		h.Set("Cache-Control", "no-store")
	}
}

// methodsOf lists the methods the mux serves for the request's path, for
// a 405's Allow header; empty when the path is served for none.
func (s *Server) methodsOf(r *http.Request) []string {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != apiFallback {
			allowed = append(allowed, m)
		}
	}
	return allowed
}

func errMethodNotAllowed(r *http.Request, allowed []string) *APIError {
	return newError(http.StatusMethodNotAllowed, "MethodNotAllowed", "%s is not served on %s; it takes %s", r.Method, r.URL.Path, strings.Join(allowed, ", "))
}
