package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/purser-io/purser/internal/api/feed"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Watch limits: a watch's selection is re-read whenever the inventory's
// feed reports a change that may be in it, and what changed is reported,
// so it is offered for selections of at most watchMax records; a wider
// one is refused with a hint to narrow it. watchPoll is the wait before
// following the feed again after a failure.
const (
	watchPoll      = time.Second
	watchMax       = 10_000
	watchKeepalive = 15 * time.Second
	// watchRecheck is how often an open watch looks whether its user's
	// rights may have changed (a reload of the tokens or policy file, an
	// ID token past its expiry), and if so asks again.
	watchRecheck = time.Second
	// watchBacklog is how many polls' worth of events a watcher may fall
	// behind before it is dropped: a client that does not read must not
	// hold the poll, or memory, for the others.
	watchBacklog = 16
	// watchRetrySeconds is what a watch refused for the caps asks the
	// client to wait.
	watchRetrySeconds = 5
)

// WatchEvent is one Server-Sent Event of an inventory watch: its event
// name is the type (ADDED, MODIFIED, DELETED), its data this JSON. The
// last event of a watch the server ends is CLOSED, whose reason says
// why; the client connects again (and is refused if it may no longer
// read).
type WatchEvent struct {
	Type   string         `json:"type"`
	Item   *InventoryItem `json:"item,omitempty"`
	Reason string         `json:"reason,omitempty"`
}

// watchHub runs one poll per distinct selection, shared by every watch of
// it, so that a hundred consoles open on the same page cost one read per
// change rather than a hundred; and it caps how many watches are open,
// per user and in all.
type watchHub struct {
	s              *Server
	perUser, total int
	timeout        time.Duration

	mu     sync.Mutex
	byUser map[string]int
	open   int
	polls  map[string]*watchPoller
}

func newWatchHub(s *Server, perUser, total int, timeout time.Duration) *watchHub {
	return &watchHub{s: s, perUser: perUser, total: total, timeout: timeout, byUser: map[string]int{}, polls: map[string]*watchPoller{}}
}

// acquire counts a new watch of u, or refuses it (429) past a cap.
func (h *watchHub) acquire(u policy.User) (release func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.byUser[u.Name] >= h.perUser:
		return nil, errTooManyRequests(watchRetrySeconds*time.Second, "user %q has %d inventory watches open, the most allowed; close one first", u.Name, h.perUser)
	case h.open >= h.total:
		return nil, errTooManyRequests(watchRetrySeconds*time.Second, "the server has %d inventory watches open, the most it serves; retry later", h.total)
	}
	h.byUser[u.Name]++
	h.open++
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.byUser[u.Name]--
			if h.byUser[u.Name] == 0 {
				delete(h.byUser, u.Name)
			}
			h.open--
		})
	}, nil
}

type watchCounts struct{ watches, polls int }

func (h *watchHub) counts() watchCounts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return watchCounts{watches: h.open, polls: len(h.polls)}
}

// selectionKey names a selection; equal keys select the same records.
func selectionKey(f store.InventoryFilter) string {
	sel := ""
	if f.Selector != nil {
		sel = f.Selector.String()
	}
	return strings.Join([]string{f.Cluster, f.APIVersion, f.Kind, f.Namespace, f.Name, f.Health, sel,
		strconv.FormatBool(f.WithoutObject), strconv.FormatBool(f.System)}, "\x00")
}

// subscribe joins the poll of f's selection, starting it (and reading the
// selection once, so that a selection too wide is refused before the
// stream begins) when none runs. It returns the records as they are now
// and the watcher that receives every change after them.
func (h *watchHub) subscribe(ctx context.Context, f store.InventoryFilter) (map[string]InventoryItem, *watcher, error) {
	key := selectionKey(f)
	for {
		h.mu.Lock()
		p := h.polls[key]
		if p == nil {
			p = &watchPoller{hub: h, key: key, filter: f, watchers: map[*watcher]bool{}, ready: make(chan struct{})}
			h.polls[key] = p
			h.mu.Unlock()
			p.start(ctx)
		} else {
			h.mu.Unlock()
		}
		select {
		case <-p.ready:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		if p.err != nil {
			return nil, nil, p.err
		}
		if seen, w, ok := p.join(); ok {
			return seen, w, nil
		}
		// The poll stopped as its last watcher left: start another.
	}
}

// watchPoller reads one selection when the feed says it may have changed, and sends what changed
// to its watchers. It stops when its last watcher leaves.
type watchPoller struct {
	hub    *watchHub
	key    string
	filter store.InventoryFilter
	ready  chan struct{} // closed once the first read is done
	err    error         // of the first read; set before ready closes

	mu       sync.Mutex
	seen     map[string]InventoryItem
	watchers map[*watcher]bool
	stopped  bool
	cancel   context.CancelFunc // ends the loop; set before it starts
}

// watcher is one watch's end of a poll.
type watcher struct {
	poll   *watchPoller
	events chan []WatchEvent
	// ended says why the stream ends, once events is closed.
	ended string
}

func (p *watchPoller) start(ctx context.Context) {
	// The first read runs in the request that started the poll, so that
	// its error is that request's answer, but is not cut short if that
	// client leaves, since others may wait for it; the loop belongs to no
	// request. The feed is joined first: what changes after the read is
	// in its batches.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	sub, err := p.hub.s.feed.Subscribe(rctx)
	var seen map[string]InventoryItem
	if err == nil {
		if seen, err = p.read(rctx); err != nil {
			sub.Close()
		}
	}
	cancel()
	if err != nil {
		p.err = err
		p.hub.mu.Lock()
		delete(p.hub.polls, p.key)
		p.hub.mu.Unlock()
		close(p.ready)
		return
	}
	// The loop belongs to the poll, not to a request: stop ends it.
	loopCtx, stop := context.WithCancel(context.Background())
	p.mu.Lock()
	p.seen, p.cancel = seen, stop
	p.mu.Unlock()
	close(p.ready)
	go p.loop(loopCtx, sub)
}

func (p *watchPoller) join() (map[string]InventoryItem, *watcher, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil, nil, false
	}
	w := &watcher{poll: p, events: make(chan []WatchEvent, watchBacklog)}
	p.watchers[w] = true
	seen := make(map[string]InventoryItem, len(p.seen))
	for k, v := range p.seen {
		seen[k] = v
	}
	return seen, w, true
}

// leave removes w; the last watcher out stops the poll.
func (p *watchPoller) leave(w *watcher) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.watchers[w] {
		return
	}
	delete(p.watchers, w)
	if len(p.watchers) == 0 && !p.stopped {
		p.stop()
	}
}

// stop ends the poll; p.mu is held.
func (p *watchPoller) stop() {
	p.stopped = true
	if p.cancel != nil {
		p.cancel()
	}
	p.hub.mu.Lock()
	if p.hub.polls[p.key] == p {
		delete(p.hub.polls, p.key)
	}
	p.hub.mu.Unlock()
}

// loop re-reads the selection when the inventory's shared feed
// (internal/api/feed) reports a change that may be in it, rather than on a
// timer: an idle selection costs no read, and a thousand selections cost
// one feed. sub was taken before the first read, so no change after that
// read is missed.
func (p *watchPoller) loop(ctx context.Context, sub *feed.Subscription[store.InventoryChange]) {
	defer func() { sub.Close() }()
	for {
		select {
		case <-ctx.Done():
			return
		case b, ok := <-sub.Events():
			if !ok {
				// Fell behind the feed: read again, and follow it anew.
				next, err := p.hub.s.feed.Subscribe(ctx)
				if err != nil {
					if !reconcile.Sleep(ctx, watchPoll) {
						return
					}
					continue
				}
				sub = next
				p.poll(ctx)
				continue
			}
			if slices.ContainsFunc(b.Changes, func(c store.InventoryChange) bool { return mayMatch(p.filter, &c.Row) }) {
				p.poll(ctx)
			}
		}
	}
}

// mayMatch reports whether a change of r may concern the selection f
// (a removal's record carries no health: it may).
func mayMatch(f store.InventoryFilter, r *store.InventoryRow) bool {
	switch {
	case f.Cluster != "" && r.Cluster != f.Cluster, f.APIVersion != "" && r.APIVersion != f.APIVersion,
		f.Kind != "" && r.Kind != f.Kind, f.Namespace != "" && r.Namespace != f.Namespace, f.Name != "" && r.Name != f.Name:
		return false
	case f.Health != "" && r.Health != "" && r.Health != f.Health:
		return false
	case !f.System && store.IsSystemObject(r.Kind, r.Namespace, r.Name, r.Labels):
		return false
	case f.Selector != nil && !f.Selector.Matches(labels.Set(r.Labels)):
		return false
	}
	return true
}

// poll reads the selection once and sends what changed to the watchers.
func (p *watchPoller) poll(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	now, err := p.read(rctx)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return // the last watcher left, and stop ended ctx
	}
	if err != nil {
		// Every watcher is told why, and reconnects.
		for w := range p.watchers {
			w.ended = err.Error()
			close(w.events)
		}
		p.watchers = map[*watcher]bool{}
		p.stop()
		return
	}
	events := diff(p.seen, now)
	p.seen = now
	if len(events) == 0 {
		return
	}
	for w := range p.watchers {
		select {
		case w.events <- events:
		default:
			w.ended = "the client read too slowly and fell behind; watch again"
			close(w.events)
			delete(p.watchers, w)
		}
	}
	if len(p.watchers) == 0 {
		p.stop()
	}
}

// read returns the selection, every page of it, as of one snapshot, with
// each record's seenAt from its cluster's freshness.
func (p *watchPoller) read(ctx context.Context) (map[string]InventoryItem, error) {
	s := p.hub.s
	f := p.filter
	f.Continue = ""
	out := map[string]InventoryItem{}
	err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		clear(out)
		fresh, err := tx.Agents().ListFreshness(ctx)
		if err != nil {
			return err
		}
		current := map[string]*time.Time{}
		for c, a := range fresh {
			current[c] = agentStatus(a, s.now(), false).CurrentUntil
		}
		f.Continue = ""
		for {
			rows, next, err := tx.Inventory().List(ctx, f)
			if err != nil {
				return err
			}
			for _, row := range rows {
				out[row.Cluster+"/"+row.UID] = inventoryItem(row, current[row.Cluster])
			}
			if next == "" {
				return nil
			}
			if len(out) >= watchMax {
				return errBadRequest("the selection holds more than %d records; narrow it (cluster, namespace, kind, labelSelector) to watch it", watchMax)
			}
			f.Continue = next
		}
	})
	return out, err
}

// diff returns the events that turn seen into now.
func diff(seen, now map[string]InventoryItem) []WatchEvent {
	var out []WatchEvent
	for k, it := range now {
		prev, ok := seen[k]
		switch {
		case !ok:
			out = append(out, WatchEvent{Type: "ADDED", Item: &it})
		// A change of the record is an event, not one of seenAt, which
		// moves with every heartbeat of a fresh cluster: clients follow
		// that from the cluster's freshness.
		case prev.ResourceVersion != it.ResourceVersion || prev.Health != it.Health || prev.Phase != it.Phase:
			out = append(out, WatchEvent{Type: "MODIFIED", Item: &it})
		}
	}
	for k, it := range seen {
		if _, ok := now[k]; !ok {
			out = append(out, WatchEvent{Type: "DELETED", Item: &it})
		}
	}
	return out
}

// watchInventory serves GET /api/v1/inventory?watch=true as Server-Sent
// Events: every record of the selection as ADDED, then each change as it
// reaches the database. It diffs the selection level-wise rather than
// tailing a log, so nothing it reports depends on having seen every
// intermediate write, and a reconnecting client simply starts again.
func (s *Server) watchInventory(w http.ResponseWriter, r *http.Request, u policy.User, f store.InventoryFilter) error {
	flusher, ok := w.(http.Flusher)
	if !ok {
		return errBadRequest("this connection cannot stream; watch needs HTTP/1.1 or HTTP/2 without buffering")
	}
	release, err := s.watches.acquire(u)
	if err != nil {
		return err
	}
	defer release()
	f.Limit = 0
	ctx := r.Context()
	seen, wt, err := s.watches.subscribe(ctx, f)
	if err != nil {
		return err
	}
	defer wt.poll.leave(wt)

	// A watch outlives the server's read and write timeouts, which are
	// for requests that end; it ends when the client goes or the poll does.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	send := func(ev WatchEvent) error {
		data, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, data)
		return err
	}
	for _, it := range seen {
		if send(WatchEvent{Type: "ADDED", Item: &it}) != nil {
			return nil // the client went away
		}
	}
	flusher.Flush()

	closed := func(reason string) error {
		_ = send(WatchEvent{Type: "CLOSED", Reason: reason})
		flusher.Flush()
		return nil
	}
	keepalive := time.NewTimer(watchKeepalive)
	defer keepalive.Stop()
	recheck := time.NewTimer(watchRecheck)
	defer recheck.Stop()
	end := time.NewTimer(s.watches.timeout + rand.N(s.watches.timeout))
	defer end.Stop()
	rights := s.rightsOf(u)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-end.C:
			return closed("the watch was open for as long as the server keeps one; connect again")
		case <-recheck.C:
			if !rights.mayHaveChanged(s) {
				recheck.Reset(watchRecheck)
				continue
			}
			if why := s.mayStillWatch(r, u, f); why != "" {
				return closed(why)
			}
			rights = s.rightsOf(u)
			recheck.Reset(watchRecheck)
		case <-keepalive.C:
			// A comment keeps proxies from closing an idle stream.
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return nil
			}
			flusher.Flush()
			keepalive.Reset(watchKeepalive)
		case batch, ok := <-wt.events:
			if !ok {
				// The stream has begun: say why it ends, as a comment, and
				// end it; the client reconnects.
				fmt.Fprintf(w, ": watch ended: %s\n\n", wt.ended)
				flusher.Flush()
				return nil
			}
			for _, ev := range batch {
				if send(ev) != nil {
					return nil
				}
			}
			flusher.Flush()
			keepalive.Reset(watchKeepalive)
		}
	}
}

// rights is what a watch's user was last authorized by: the reload of
// the identity files in force, and when the user's credential expires.
type rights struct {
	reloads int64
	expiry  time.Time
}

func (s *Server) rightsOf(u policy.User) rights {
	r := rights{expiry: u.Expiry}
	if s.cfg.Identities != nil {
		r.reloads = s.cfg.Identities.Reloads()
	}
	return r
}

// mayHaveChanged reports whether the user's rights may differ from what
// they were when last checked: a file was reloaded, or the credential
// expired.
func (r rights) mayHaveChanged(s *Server) bool {
	if !r.expiry.IsZero() && !s.now().Before(r.expiry) {
		return true
	}
	return s.cfg.Identities != nil && s.cfg.Identities.Reloads() != r.reloads
}

// mayStillWatch authenticates the watch's request again and authorizes
// its selection as at its start; it says why the watch must end, or "".
func (s *Server) mayStillWatch(r *http.Request, u policy.User, f store.InventoryFilter) string {
	now, ok := s.authenticate(r)
	switch {
	case !ok:
		return "the credential of this watch is no longer valid (expired, or removed from the tokens file); sign in again"
	case now.Name != u.Name:
		return "the credential of this watch now names another user"
	}
	if err := s.authorizeList(now, f.Namespace, "the inventory"); err != nil {
		return "the policy no longer lets " + now.Name + " read this: " + asAPIError(err).Message
	}
	return ""
}

// inventoryItem is a record as the API shows it; currentUntil is its
// cluster's (nil when never current).
func inventoryItem(row store.InventoryRow, currentUntil *time.Time) InventoryItem {
	seen := row.ObservedAt
	if currentUntil != nil && currentUntil.After(seen) {
		seen = *currentUntil
	}
	return InventoryItem{
		Cluster: row.Cluster, APIVersion: row.APIVersion, Kind: row.Kind, Namespace: row.Namespace, Name: row.Name,
		UID: row.UID, ResourceVersion: row.ResourceVersion, Labels: row.Labels, Health: row.Health, Phase: row.Phase,
		ObservedAt: row.ObservedAt, SeenAt: seen, Object: row.Object,
	}
}
