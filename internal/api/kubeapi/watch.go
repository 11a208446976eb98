package kubeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/purser-io/purser/internal/api/feed"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// watchRecheck is how often an open watch looks whether its user's rights
// may have changed (a reload of the tokens or policy file, a credential
// past its expiry), and if so authorizes it again.
const watchRecheck = time.Second

// watch serves ?watch=true as the kube-apiserver does: a stream of
// metav1.WatchEvent, one JSON object each, from a resourceVersion.
//
//   - resourceVersion unset or "0": the selection's objects now, each
//     ADDED, then every change (the kube-apiserver's "start at most
//     recent" with its synthetic events);
//   - sendInitialEvents=true (client-go's WatchList): the same, then a
//     BOOKMARK annotated k8s.io/initial-events-end at the list's version;
//   - resourceVersion N: every change numbered after N, from the
//     database up to where the shared feed stands, then from the feed;
//     410 Gone (reason Expired) when deletions after N were forgotten, so
//     that a reflector lists again.
//
// A record changed several times since N is told once, at its last
// change: the events lead to the same state, level by level, as the
// kube-apiserver's would.
func (a *API) watch(w http.ResponseWriter, req *request, q sel) error {
	r := req.r
	if err := parseSelectors(r, &q); err != nil {
		return err
	}
	if err := a.authorize(req.user, &q, "watch"); err != nil {
		return err
	}
	release, held, ok := a.watches.acquire(req.user.Name)
	if !ok {
		return tooMany(w, watchRetry, "user %s has %d watches open under %s, the most one user may hold at once (%d); close one before opening another",
			req.user.Name, held, Prefix, a.cfg.WatchesPerUser)
	}
	defer release()
	v := r.URL.Query()
	rvParam := v.Get("resourceVersion")
	initial := rvParam == "" || rvParam == "0" || isTrue(v.Get("sendInitialEvents"))
	bookmarks := isTrue(v.Get("allowWatchBookmarks"))
	var from int64
	if !initial {
		n, err := strconv.ParseInt(rvParam, 10, 64)
		if err != nil || n < 0 {
			return expired(fmt.Sprintf("resourceVersion %q is not one of this server's (purser's /k8s numbers changes across the farm); list again", rvParam))
		}
		from = n
	}
	ctx := r.Context()
	sub, err := a.cfg.Feed.Subscribe(ctx)
	if err != nil {
		return err
	}
	defer sub.Close()

	// What happened before the feed's position is read from the database.
	var first []watch.EventType
	var firstRows []store.InventoryRow
	var bookmarkEnd int64 = -1
	var pos int64
	if initial {
		p, err := a.read(req, &q, 0, "")
		if err != nil {
			return err
		}
		for range p.rows {
			first = append(first, watch.Added)
		}
		firstRows = p.rows
		pos = max(p.rv, sub.From)
		if isTrue(v.Get("sendInitialEvents")) {
			bookmarkEnd = pos
		}
	} else {
		var h store.FeedHead
		var changes []store.InventoryChange
		err := a.cfg.Store.Read(ctx, func(tx *store.Tx) error {
			var err error
			if h, err = tx.Inventory().FeedHead(ctx); err != nil {
				return err
			}
			if from < h.PrunedTo {
				return nil
			}
			changes, err = feed.Between(from, sub.From, func(after int64) ([]store.InventoryChange, error) {
				return tx.Inventory().Changes(ctx, after, feed.PageSize, false)
			}, func(c store.InventoryChange) int64 { return c.Seq })
			return err
		})
		if err != nil {
			return err
		}
		if from < h.PrunedTo {
			return expired(fmt.Sprintf("too old resource version: %d (%d): deletions up to %d were forgotten; list again", from, h.PrunedTo, h.PrunedTo))
		}
		for _, c := range changes {
			if !q.matches(&c.Row) {
				continue
			}
			first = append(first, eventType(c, from))
			firstRows = append(firstRows, c.Row)
		}
		pos = max(from, sub.From)
	}

	flusher, ok := w.(http.Flusher)
	if !ok {
		return badRequest("this connection cannot stream a watch")
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	table := asTable(r)
	if table != "" {
		w.Header().Set("Content-Type", "application/json;as=Table;v="+table+";g=meta.k8s.io")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	enc := &eventWriter{w: w, a: a, q: &q, r: r, table: table}
	for i := range firstRows {
		if enc.send(first[i], &firstRows[i]) != nil {
			return nil
		}
	}
	if bookmarkEnd >= 0 {
		if enc.bookmark(bookmarkEnd, true) != nil {
			return nil
		}
	}
	flusher.Flush()

	return follow(a, req, enc, flusher, sub, pos, bookmarks, func() string { return a.mayStillWatch(req, &q) },
		func(b feed.Batch[store.InventoryChange], pos int64) (bool, error) {
			sent := false
			for _, c := range b.Changes {
				if c.Seq <= pos || !q.matches(&c.Row) {
					continue
				}
				if err := enc.sendShared(eventType(c, pos), &c.Row, b.Memo); err != nil {
					return sent, err
				}
				sent = true
			}
			return sent, nil
		})
}

// follow streams a watch's changes from the shared feed after its initial
// events, until the client leaves, the watch's time is up (the client
// watches again from its last version), the feed drops it for reading too
// slowly, or its user may no longer watch (still says why, "" while it
// may). tell writes the events of one batch for a watcher that stood at
// pos, and says whether it wrote any; BOOKMARKs go every BookmarkInterval
// where asked for.
func follow[C any](a *API, req *request, enc *eventWriter, flusher http.Flusher, sub *feed.Subscription[C], pos int64, bookmarks bool,
	still func() string, tell func(b feed.Batch[C], pos int64) (bool, error),
) error {
	ctx := req.r.Context()
	timeout := a.cfg.WatchTimeout + rand.N(a.cfg.WatchTimeout)
	if s := req.r.URL.Query().Get("timeoutSeconds"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
			timeout = time.Duration(n) * time.Second
		}
	}
	end := time.NewTimer(timeout)
	defer end.Stop()
	recheck := time.NewTimer(watchRecheck)
	defer recheck.Stop()
	mark := time.NewTimer(a.cfg.BookmarkInterval)
	defer mark.Stop()
	rights := a.rightsOf(req.user)
	marked := pos
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-end.C:
			return nil // the client watches again from its last version
		case <-recheck.C:
			if rights.mayHaveChanged(a) {
				if why := still(); why != "" {
					_ = enc.status(statusErr(http.StatusForbidden, metav1.StatusReasonForbidden, why))
					flusher.Flush()
					return nil
				}
				rights = a.rightsOf(req.user)
			}
			recheck.Reset(watchRecheck)
		case <-mark.C:
			if bookmarks && pos > marked {
				if enc.bookmark(pos, false) != nil {
					return nil
				}
				flusher.Flush()
				marked = pos
			}
			mark.Reset(a.cfg.BookmarkInterval)
		case b, ok := <-sub.Events():
			if !ok {
				// Fell behind: the client watches again from the last
				// version it saw, which the database still answers.
				return nil
			}
			sent, err := tell(b, pos)
			if err != nil {
				return nil
			}
			pos = max(pos, b.Head)
			if sent {
				flusher.Flush()
			}
		}
	}
}

// eventType is how a change shows to a watcher that stood at pos.
func eventType(c store.InventoryChange, pos int64) watch.EventType {
	switch {
	case c.Deleted:
		return watch.Deleted
	case c.CreatedSeq > pos:
		return watch.Added
	}
	return watch.Modified
}

func expired(msg string) error {
	return statusErr(http.StatusGone, metav1.StatusReasonExpired, msg)
}

// eventWriter writes one watch's events.
type eventWriter struct {
	w      http.ResponseWriter
	a      *API
	q      *sel
	r      *http.Request
	table  string
	headed bool // a Table's columns were sent (only the first event has them)
}

func (e *eventWriter) write(t watch.EventType, obj []byte) error {
	// What json.Marshal of a metav1.WatchEvent writes, without it
	// scanning and compacting the object again: it is compact JSON.
	b := make([]byte, 0, len(obj)+32)
	b = append(b, `{"type":"`...)
	b = append(b, t...)
	b = append(b, `","object":`...)
	b = append(b, obj...)
	b = append(b, "}\n"...)
	_, err := e.w.Write(b)
	return err
}

// sendShared is send, the object's encoding shared with the batch's other
// watchers (memo), so that a change seen by a thousand watches is encoded
// once.
func (e *eventWriter) sendShared(t watch.EventType, row *store.InventoryRow, memo *sync.Map) error {
	if e.table != "" || memo == nil {
		return e.send(t, row)
	}
	key := row.Seq
	if v, ok := memo.Load(key); ok {
		return e.write(t, v.([]byte))
	}
	obj, err := appendObject(nil, row, row.Seq)
	if err != nil {
		return err
	}
	memo.Store(key, obj)
	return e.write(t, obj)
}

func (e *eventWriter) send(t watch.EventType, row *store.InventoryRow) error {
	if e.table != "" {
		cols := columnsOf(e.q.res)
		tbl := metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/" + e.table},
			ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(row.Seq, 10)},
			Rows:     []metav1.TableRow{tableRow(e.q.res, cols, row, e.r.URL.Query().Get("includeObject"), e.a.now())}}
		// As the kube-apiserver's watch encoder: headers on the first
		// event only (apiserver endpoints/handlers/response.go).
		if !e.headed {
			for _, c := range cols {
				tbl.ColumnDefinitions = append(tbl.ColumnDefinitions, c.def)
			}
			e.headed = true
		}
		b, err := json.Marshal(tbl)
		if err != nil {
			return err
		}
		return e.write(t, b)
	}
	obj, err := appendObject(nil, row, row.Seq)
	if err != nil {
		return err
	}
	return e.write(t, obj)
}

// bookmark sends a BOOKMARK at rv: an object of the kind with only its
// resourceVersion, as client-go's reflector reads it; end marks the end of
// the initial events (metav1.InitialEventsAnnotationKey).
func (e *eventWriter) bookmark(rv int64, end bool) error {
	md := map[string]any{"resourceVersion": strconv.FormatInt(rv, 10)}
	if end {
		md["annotations"] = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	obj, err := json.Marshal(map[string]any{"apiVersion": e.q.res.apiVersion(), "kind": e.q.res.gvk.Kind, "metadata": md})
	if err != nil {
		return err
	}
	return e.write(watch.Bookmark, obj)
}

func (e *eventWriter) status(err error) error {
	var se *statusError
	if !errors.As(err, &se) {
		return nil
	}
	b, _ := json.Marshal(se.st)
	return e.write(watch.Error, b)
}

// rights is what a watch's user was last authorized by: the reload of the
// identity files in force, and when the user's credential expires.
type rights struct {
	reloads int64
	expiry  time.Time
}

func (a *API) rightsOf(u policy.User) rights {
	return rights{reloads: a.cfg.Reloads(), expiry: u.Expiry}
}

func (r rights) mayHaveChanged(a *API) bool {
	if !r.expiry.IsZero() && !a.now().Before(r.expiry) {
		return true
	}
	return a.cfg.Reloads() != r.reloads
}

// mayStillWatch authenticates the watch's request again and authorizes its
// selection as at its start; it says why the watch must end, or "".
func (a *API) mayStillWatch(req *request, q *sel) string {
	now, ok := a.cfg.Authenticate(req.r)
	switch {
	case !ok:
		return "the credential of this watch is no longer valid (expired, or removed from the tokens file); sign in again"
	case now.Name != req.user.Name:
		return "the credential of this watch now names another user"
	}
	if err := a.authorize(now, q, "watch"); err != nil {
		return "the policy no longer lets " + now.Name + " watch this: " + err.Error()
	}
	return ""
}
