package kubeapi

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of the caps per user (Config.WatchesPerUser,
// Config.RequestsPerUser).
const (
	// DefaultWatchesPerUser: an informer holds one watch per kind, and a
	// tool that reads the farm (Argo CD, k9s, a controller) watches a few
	// dozen kinds; a hundred leaves room for several, not for thousands.
	DefaultWatchesPerUser = 100
	// DefaultRequestsPerUser: Argo CD's cluster cache lists with fifty at
	// once by default, the most parallel of the usual clients.
	DefaultRequestsPerUser = 50
)

// watchRetry and requestRetry are what a request refused by a cap asks
// the client to wait (Retry-After): a watch is freed when another ends,
// a request within a moment.
const (
	watchRetry   = 5
	requestRetry = 1
)

// perUser counts what each user holds open (watches, or requests under
// way) against a cap, so that one identity cannot take every connection,
// goroutine and feed subscription of the server. It counts in this
// process: each replica of the API caps on its own.
type perUser struct {
	limit int

	mu   sync.Mutex
	open map[string]int
}

func newPerUser(limit int) *perUser { return &perUser{limit: limit, open: map[string]int{}} }

// acquire takes one for user, or says how many user holds when that is
// the cap already.
func (p *perUser) acquire(user string) (release func(), held int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := p.open[user]; n >= p.limit {
		return nil, n, false
	}
	p.open[user]++
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.open[user]--
			if p.open[user] <= 0 {
				delete(p.open, user)
			}
		})
	}, 0, true
}

// tooMany is the 429 of a cap, with the wait it asks for; the message
// names the cap, how many the user holds and the setting that sets it.
func tooMany(w http.ResponseWriter, retrySeconds int, format string, args ...any) error {
	w.Header().Set("Retry-After", strconv.Itoa(retrySeconds))
	return statusErr(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, fmt.Sprintf(format, args...))
}
