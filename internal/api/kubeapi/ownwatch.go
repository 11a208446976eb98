package kubeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/purser-io/purser/internal/api/feed"
	"github.com/purser-io/purser/internal/hub/store"
)

// ownHead is where the change sequence of purser's own kinds stands, the
// resourceVersion of a list: read before the list's own read, so that
// every change the list does not show is numbered above it (numbering
// follows commit, store.OwnFeed); a change the list shows may be numbered
// above it too, and is told again by a watch from it, which leads to the
// same state. It numbers first, so that a watch from it has little to
// catch up on.
func (a *API) ownHead(r *http.Request) (store.FeedHead, error) {
	ctx := r.Context()
	if a.cfg.Number != nil {
		// A failure (the primary out of reach) leaves the head where it
		// stands, still a correct position.
		_ = a.cfg.Number(ctx)
	}
	var h store.FeedHead
	err := a.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		h, err = tx.OwnFeed().Head(ctx)
		return err
	})
	return h, err
}

// watchable says whether watches of the kind are served.
func (a *API) watchable(k *OwnKind) bool {
	return k.MayRead != nil && a.cfg.OwnFeed != nil
}

// watch serves ?watch=true of one of purser's kinds, as watch.go serves
// the inventory's, from the change sequence of purser's own kinds
// (store.OwnFeed): from a resourceVersion every change numbered after it;
// without one (or "0", or sendInitialEvents=true) the selection's objects
// now, each ADDED, then every change. Each object is read through the
// REST API's Get as the watch's user, so that it shows as a list shows
// it and only where the user may read it; an object changed several
// times between two reads of the feed is told once, as it is now.
func (o *ownCall) watch() error {
	a, k, r := o.a, o.k, o.req.r
	if !a.watchable(k) {
		return statusErr(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			"watching "+k.Plural+"."+OwnGroup+" is not served: purser keeps no change sequence of them; list again")
	}
	q := sel{res: k.resource()}
	if err := parseSelectors(r, &q); err != nil {
		return err
	}
	if o.name != "" {
		// A watch of one object by its path, as a field selector.
		if q.name != "" && q.name != o.name {
			q.none = true
		}
		q.name = o.name
	}
	v := r.URL.Query()
	rvParam := v.Get("resourceVersion")
	initial := rvParam == "" || rvParam == "0" || isTrue(v.Get("sendInitialEvents"))
	var from int64
	if !initial {
		n, err := strconv.ParseInt(rvParam, 10, 64)
		if err != nil || n < 0 {
			return badRequest(fmt.Sprintf("resourceVersion %q is not a position of purser's change sequence of %s.%s (a whole number from a list, an event or a bookmark of it); list again", rvParam, k.Plural, OwnGroup))
		}
		from = n
	}
	// Authorized as a list of the same selection: a tenant's watch across
	// every namespace is refused as its list is.
	if _, err := o.listPage(url.Values{"limit": {"1"}}); err != nil {
		return err
	}
	release, held, ok := a.watches.acquire(o.req.user.Name)
	if !ok {
		return tooMany(o.w, watchRetry, "user %s has %d watches open under %s, the most one user may hold at once (%d); close one before opening another",
			o.req.user.Name, held, Prefix, a.cfg.WatchesPerUser)
	}
	defer release()
	ctx := r.Context()
	sub, err := a.cfg.OwnFeed.Subscribe(ctx)
	if err != nil {
		return err
	}
	defer sub.Close()

	ow := &ownWatch{o: o, q: &q, told: map[string]bool{}, resumed: !initial}
	var firstObjs []json.RawMessage
	var firstChanges []store.OwnChange
	bookmarkEnd := int64(-1)
	var pos int64
	if initial {
		pos = sub.From
		items, err := o.listAll()
		if err != nil {
			return err
		}
		firstObjs = items
		if isTrue(v.Get("sendInitialEvents")) {
			bookmarkEnd = pos
		}
	} else {
		h, err := a.ownHead(r)
		if err != nil {
			return err
		}
		switch {
		case from < h.PrunedTo:
			return expired(fmt.Sprintf("too old resource version: %d (%d): changes of %s.%s up to %d were forgotten; list again", from, h.PrunedTo, k.Plural, OwnGroup, h.PrunedTo))
		case from > max(h.Seq, sub.From):
			return expired(fmt.Sprintf("resourceVersion %d is ahead of purser's change sequence of %s.%s (at %d): it is not one this server gave; list again", from, k.Plural, OwnGroup, max(h.Seq, sub.From)))
		}
		err = a.cfg.Store.Read(ctx, func(tx *store.Tx) error {
			var err error
			firstChanges, err = feed.Between(from, sub.From, func(after int64) ([]store.OwnChange, error) {
				return tx.OwnFeed().Changes(ctx, after, feed.PageSize)
			}, func(c store.OwnChange) int64 { return c.Seq })
			return err
		})
		if err != nil {
			return err
		}
		pos = max(from, sub.From)
	}

	flusher, ok := o.w.(http.Flusher)
	if !ok {
		return badRequest("this connection cannot stream a watch")
	}
	rc := http.NewResponseController(o.w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	table := asTable(r)
	if table != "" {
		o.w.Header().Set("Content-Type", "application/json;as=Table;v="+table+";g=meta.k8s.io")
	} else {
		o.w.Header().Set("Content-Type", "application/json")
	}
	o.w.Header().Set("Cache-Control", "no-store")
	o.w.WriteHeader(http.StatusOK)
	ow.enc = &eventWriter{w: o.w, a: a, q: &q, r: r, table: table}
	for _, raw := range firstObjs {
		if _, err := ow.sendObject(watch.Added, raw); err != nil {
			return nil
		}
	}
	if _, err := ow.tell(firstChanges, from); err != nil {
		return nil
	}
	if bookmarkEnd >= 0 {
		if ow.enc.bookmark(bookmarkEnd, true) != nil {
			return nil
		}
	}
	flusher.Flush()
	return follow(a, o.req, ow.enc, flusher, sub, pos, isTrue(v.Get("allowWatchBookmarks")), o.mayStillWatch,
		func(b feed.Batch[store.OwnChange], pos int64) (bool, error) { return ow.tell(b.Changes, pos) })
}

// ownWatch is one watch of one of purser's kinds.
type ownWatch struct {
	o   *ownCall
	q   *sel
	enc *eventWriter
	// told are the objects (uid) this watch has shown and not yet told
	// deleted: a change of one is MODIFIED; a deletion of one is told
	// whatever the label selector, which a deleted object can no longer
	// be matched against.
	told map[string]bool
	// resumed: the watch started from a resourceVersion, and its client
	// may hold objects this watch never showed.
	resumed bool
}

// tell writes the events of changes for a watcher that stood at pos: an
// object changed more than once among them is told once, at its last
// change; it says whether it wrote any.
func (ow *ownWatch) tell(changes []store.OwnChange, pos int64) (bool, error) {
	last := map[string]int{}
	added := map[string]bool{}
	for i, c := range changes {
		if c.Seq <= pos || c.Kind != ow.o.k.Kind {
			continue
		}
		last[c.UID] = i
		if c.Type == string(watch.Added) {
			added[c.UID] = true
		}
	}
	sent := false
	for i, c := range changes {
		if j, ok := last[c.UID]; !ok || j != i || c.Seq <= pos || c.Kind != ow.o.k.Kind {
			continue
		}
		switch {
		case ow.q.name != "" && ow.q.name != c.Name,
			ow.q.namespace != "" && ow.q.namespace != c.Namespace,
			ow.o.k.Namespaced && ow.o.ns != "" && ow.o.ns != c.Namespace:
			continue
		}
		var ok bool
		var err error
		if c.Type == string(watch.Deleted) {
			ok, err = ow.sendDeleted(c)
		} else {
			ok, err = ow.sendChanged(c, added[c.UID])
		}
		if err != nil {
			return sent, err
		}
		sent = sent || ok
	}
	return sent, nil
}

// sendChanged reads the object as the user and tells it; one gone since,
// or one the user may not read, is not told (a deletion follows).
func (ow *ownWatch) sendChanged(c store.OwnChange, added bool) (bool, error) {
	o := *ow.o
	o.ns, o.name = c.Namespace, c.Name
	if !o.k.Namespaced {
		o.ns = ""
	}
	_, raw, err := o.call(o.k.Get, http.MethodGet, nil, nil)
	var se *statusError
	if errors.As(err, &se) && (se.st.Code == http.StatusNotFound || se.st.Code == http.StatusForbidden) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var m struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	if json.Unmarshal(raw, &m) == nil && m.Metadata.UID != "" && o.k.Namespaced && m.Metadata.UID != c.UID {
		return false, nil // another object of the name since: its own change tells it
	}
	t := watch.Modified
	if added && !ow.told[c.UID] {
		t = watch.Added
	}
	ok, err := ow.sendObject(t, raw)
	if ok {
		ow.told[c.UID] = true
	}
	return ok, err
}

// sendObject tells an object as served, when the selection matches it.
func (ow *ownWatch) sendObject(t watch.EventType, raw json.RawMessage) (bool, error) {
	match, md, err := ownMatches(ow.q, raw)
	if err != nil || !match {
		return false, err
	}
	if md.UID != "" {
		ow.told[md.UID] = true
	}
	return true, ow.write(t, raw, md.ResourceVersion)
}

// write writes one event of an object as served: itself, or its row of a
// Table (the columns on the first event only, as the kube-apiserver's
// watch encoder does).
func (ow *ownWatch) write(t watch.EventType, raw json.RawMessage, rv string) error {
	if ow.enc.table == "" {
		return ow.enc.write(t, raw)
	}
	tbl, err := ow.o.a.ownTable(ow.o.k, ow.o.req.r, ow.enc.table, []json.RawMessage{raw}, metav1.ListMeta{ResourceVersion: rv})
	if err != nil {
		return err
	}
	if ow.enc.headed {
		tbl.ColumnDefinitions = nil
	}
	ow.enc.headed = true
	b, err := json.Marshal(tbl)
	if err != nil {
		return err
	}
	return ow.enc.write(t, b)
}

// sendDeleted tells a deletion, with the object's identity only (its
// last state is not kept), to a user who may read its namespace.
func (ow *ownWatch) sendDeleted(c store.OwnChange) (bool, error) {
	k := ow.o.k
	if err := k.MayRead(ow.o.req.user, nsOrName(k, c.Namespace, c.Name)); err != nil {
		return false, nil
	}
	if ow.q.labels != nil && !ow.told[c.UID] && !ow.resumed {
		return false, nil // never shown here, so never matched
	}
	md := map[string]any{"name": c.Name, "resourceVersion": strconv.FormatInt(c.Seq, 10)}
	if k.Namespaced {
		md["namespace"], md["uid"] = c.Namespace, c.UID
	}
	raw, err := json.Marshal(map[string]any{"apiVersion": OwnGroup + "/" + OwnVersion, "kind": k.Kind, "metadata": md})
	if err != nil {
		return false, err
	}
	delete(ow.told, c.UID)
	if ow.q.none || ow.q.fields != nil && !ow.q.fields.Matches(fields.Set{"metadata.name": c.Name, "metadata.namespace": c.Namespace}) {
		return false, nil
	}
	return true, ow.write(watch.Deleted, raw, strconv.FormatInt(c.Seq, 10))
}

// ownMeta is what a selection looks at of an object as served.
type ownMeta struct {
	Name            string            `json:"name"`
	Namespace       string            `json:"namespace"`
	UID             string            `json:"uid"`
	ResourceVersion string            `json:"resourceVersion"`
	Labels          map[string]string `json:"labels"`
}

// ownMatches says whether an object as served is in the selection.
func ownMatches(q *sel, raw json.RawMessage) (bool, ownMeta, error) {
	var m struct {
		Metadata ownMeta `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return false, m.Metadata, fmt.Errorf("an object as served: %w", err)
	}
	md := m.Metadata
	if q.none || (q.labels != nil && !q.labels.Matches(labels.Set(md.Labels))) ||
		(q.fields != nil && !q.fields.Matches(fields.Set{"metadata.name": md.Name, "metadata.namespace": md.Namespace})) ||
		(q.name != "" && q.name != md.Name) {
		return false, md, nil
	}
	return true, md, nil
}

// listPage calls the kind's List as the request's user, for its
// namespace, with query added.
func (o *ownCall) listPage(query url.Values) ([]json.RawMessage, error) {
	q := url.Values{}
	if o.k.Namespaced {
		q.Set("namespace", o.ns)
	}
	for k, v := range query {
		q[k] = v
	}
	saved := o.name
	o.name = ""
	_, body, err := o.call(o.k.List, http.MethodGet, q, nil)
	o.name = saved
	if err != nil {
		return nil, err
	}
	var page struct {
		Items    []json.RawMessage `json:"items"`
		Continue string            `json:"continue"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("list %s: %w", o.k.Plural, err)
	}
	if page.Continue != "" {
		query.Set("continue", page.Continue)
	} else {
		query.Del("continue")
	}
	return page.Items, nil
}

// listAll lists every object of the request's namespace, page by page.
func (o *ownCall) listAll() ([]json.RawMessage, error) {
	var out []json.RawMessage
	query := url.Values{"limit": {"500"}}
	for {
		items, err := o.listPage(query)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if query.Get("continue") == "" {
			return out, nil
		}
	}
}

// mayStillWatch authenticates the watch's request again and authorizes it
// as at its start; it says why the watch must end, or "".
func (o *ownCall) mayStillWatch() string {
	now, ok := o.a.cfg.Authenticate(o.req.r)
	switch {
	case !ok:
		return "the credential of this watch is no longer valid (expired, or removed from the tokens file); sign in again"
	case now.Name != o.req.user.Name:
		return "the credential of this watch now names another user"
	}
	o.req.user = now
	if _, err := o.listPage(url.Values{"limit": {"1"}}); err != nil {
		return "the policy no longer lets " + now.Name + " watch this: " + err.Error()
	}
	return ""
}
