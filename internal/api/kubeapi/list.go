package kubeapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// FieldCluster is the field selector's name of an object's cluster
// (--field-selector cluster=NAME); metadata.name and metadata.namespace are
// the others served, as every kube-apiserver serves them.
const FieldCluster = "cluster"

// sel is what one list, get or watch selects.
type sel struct {
	res                      *resource
	cluster, namespace, name string
	labels                   labels.Selector // nil: every object
	storeLabels              bool            // labels is passed to the store's query
	fields                   fields.Selector // nil: every object
	none                     bool            // contradictory selectors: nothing matches
}

// filter is the store's part of the selection.
func (q *sel) filter() store.InventoryFilter {
	f := store.InventoryFilter{Cluster: q.cluster, APIVersion: q.res.apiVersion(), Kind: q.res.gvk.Kind,
		Namespace: q.namespace, Name: q.name}
	if q.storeLabels {
		f.Selector = q.labels
	}
	return f
}

// matches applies every selector to one record (the store applied its
// part already; a feed's change is checked here alone).
func (q *sel) matches(r *store.InventoryRow) bool {
	switch {
	case q.none:
		return false
	case r.APIVersion != q.res.apiVersion() || r.Kind != q.res.gvk.Kind:
		return false
	case q.cluster != "" && r.Cluster != q.cluster,
		q.namespace != "" && r.Namespace != q.namespace,
		q.name != "" && r.Name != q.name:
		return false
	case store.IsSystemObject(r.Kind, r.Namespace, r.Name, r.Labels):
		// Left out as the inventory's lists leave them out: they are in
		// every cluster, the same.
		return false
	case q.labels != nil && !q.labels.Matches(labels.Set(r.Labels)):
		return false
	case q.fields != nil && !q.fields.Matches(fields.Set{"metadata.name": r.Name, "metadata.namespace": r.Namespace, FieldCluster: r.Cluster}):
		return false
	}
	return true
}

// parseSelectors reads labelSelector and fieldSelector into q.
func parseSelectors(r *http.Request, q *sel) error {
	v := r.URL.Query()
	if s := v.Get("labelSelector"); s != "" {
		parsed, err := labels.Parse(s)
		if err != nil {
			return badRequest("unable to parse requirement: " + err.Error())
		}
		q.labels, q.storeLabels = parsed, true
		reqs, _ := parsed.Requirements()
		for _, req := range reqs {
			if op := req.Operator(); op == selection.GreaterThan || op == selection.LessThan {
				q.storeLabels = false // the store's SQL has no order on values: matched here
			}
		}
	}
	if s := v.Get("fieldSelector"); s != "" {
		parsed, err := fields.ParseSelector(s)
		if err != nil {
			return badRequest("invalid field selector: " + err.Error())
		}
		for _, req := range parsed.Requirements() {
			var slot *string
			switch req.Field {
			case "metadata.name":
				slot = &q.name
			case "metadata.namespace":
				slot = &q.namespace
			case FieldCluster:
				slot = &q.cluster
			default:
				// The kube-apiserver's words for a field it does not index.
				return badRequest(fmt.Sprintf("field label not supported: %s (the farm's API selects on metadata.name, metadata.namespace and %s)", req.Field, FieldCluster))
			}
			if req.Operator == selection.Equals || req.Operator == selection.DoubleEquals {
				if *slot != "" && *slot != req.Value {
					q.none = true
				}
				*slot = req.Value
			}
		}
		q.fields = parsed
	}
	return nil
}

// authorize applies the policy's namespace rights to a read: a namespace
// the user may read, or every namespace for one who reads everywhere. A
// namespace-limited user listing across namespaces (kubectl -A) is
// refused, 403, as a kube-apiserver refuses one without a cluster-wide
// binding, rather than shown a part presented as the whole.
func (a *API) authorize(u policy.User, q *sel, verb string) error {
	p := a.cfg.Policy()
	group := q.res.gvk.Group
	if q.namespace != "" && q.res.namespaced {
		if !p.Allowed(u, q.namespace, policy.VerbRead) {
			return forbidden(fmt.Sprintf("%s is forbidden: User %q cannot %s resource %q in API group %q in the namespace %q: purser's policy gives no role there",
				q.res.plural, u.Name, verb, q.res.plural, group, q.namespace))
		}
		return nil
	}
	if !p.ReadsEverywhere(u) && !q.res.namespaced {
		return forbidden(fmt.Sprintf("%s is forbidden: User %q cannot %s resource %q in API group %q: it is cluster-scoped, and purser's policy lets only a user who reads every namespace read it",
			q.res.plural, u.Name, verb, q.res.plural, group))
	}
	if !p.ReadsEverywhere(u) {
		return forbidden(fmt.Sprintf("%s is forbidden: User %q cannot %s resource %q in API group %q at the cluster scope: purser's policy lets this user read only some namespaces; name one (-n NAMESPACE)",
			q.res.plural, u.Name, verb, q.res.plural, group))
	}
	return nil
}

// continueToken is the list's position: the store's keyset token, and the
// resourceVersion of the list's first page, which every page answers, so
// that a watch from it sees every change made while the pages were read.
type continueToken struct {
	RV  int64  `json:"rv"`
	Key string `json:"k"`
}

func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil || t.Key == "" {
		return t, badRequest("the continue token is not one this server gave")
	}
	return t, nil
}

func (t continueToken) encode() string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

// page is what a list read.
type page struct {
	rows     []store.InventoryRow
	rv       int64
	next     string
	warnings []string
}

// read lists q: one page of limit when limit > 0, else everything, in
// one snapshot of the database.
func (a *API) read(req *request, q *sel, limit int64, cont string) (*page, error) {
	ctx := req.r.Context()
	var tok continueToken
	if cont != "" {
		var err error
		if tok, err = decodeContinue(cont); err != nil {
			return nil, err
		}
	}
	out := &page{}
	err := a.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		*out = page{}
		h, err := tx.Inventory().FeedHead(ctx)
		if err != nil {
			return err
		}
		out.rv = h.Seq
		if tok.RV != 0 {
			out.rv = tok.RV
		}
		if out.warnings, err = a.staleWarnings(req, tx, q.cluster); err != nil {
			return err
		}
		if q.none {
			return nil
		}
		f := q.filter()
		f.Continue = tok.Key
		for {
			if limit > 0 {
				f.Limit = int(limit) - len(out.rows)
			}
			rows, next, err := tx.Inventory().List(ctx, f)
			if err != nil {
				return err
			}
			for _, r := range rows {
				if q.matches(&r) {
					out.rows = append(out.rows, r)
				}
			}
			if next == "" {
				return nil
			}
			if limit > 0 && int64(len(out.rows)) >= limit {
				out.next = continueToken{RV: out.rv, Key: next}.encode()
				return nil
			}
			f.Continue = next
		}
	})
	return out, err
}

// staleWarnings names the clusters (of the request's, or every one) whose
// agent is not fresh, in the Warning header's text: kubectl prints each.
func (a *API) staleWarnings(req *request, tx *store.Tx, cluster string) ([]string, error) {
	fresh, err := tx.Agents().ListFreshness(req.r.Context())
	if err != nil {
		return nil, err
	}
	names := []string{cluster}
	if cluster == "" {
		clusters, err := tx.Clusters().List(req.r.Context())
		if err != nil {
			return nil, err
		}
		names = names[:0]
		for _, c := range clusters {
			names = append(names, c.Name)
		}
	}
	slices.Sort(names)
	var out []string
	now := a.now()
	for _, c := range names {
		if f := a.cfg.Freshness(req.user, fresh[c], now); !f.Fresh {
			out = append(out, fmt.Sprintf("cluster %s: its records may be stale (%s)", c, f.Message))
		}
	}
	return out, nil
}

// setWarnings writes warnings as the kube-apiserver does (RFC 7234
// warn-code 299, agent "-"), which kubectl and client-go print.
func setWarnings(w http.ResponseWriter, warnings []string) {
	for _, m := range warnings {
		w.Header().Add("Warning", "299 - "+strconv.Quote(m))
	}
}

func writeTable(w http.ResponseWriter, t *metav1.Table) error {
	b, err := encodeTable(t)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}

func parseLimit(r *http.Request) (int64, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest("limit must be a number of objects, got " + strconv.Quote(s))
	}
	return n, nil
}

func (a *API) list(w http.ResponseWriter, req *request, q sel) error {
	if err := parseSelectors(req.r, &q); err != nil {
		return err
	}
	if err := a.authorize(req.user, &q, "list"); err != nil {
		return err
	}
	limit, err := parseLimit(req.r)
	if err != nil {
		return err
	}
	p, err := a.read(req, &q, limit, req.r.URL.Query().Get("continue"))
	if err != nil {
		return err
	}
	setWarnings(w, p.warnings)
	if asTable(req.r) != "" {
		return writeTable(w, a.table(q.res, p.rows, req.r, metav1.ListMeta{
			ResourceVersion: strconv.FormatInt(p.rv, 10), Continue: p.next}))
	}
	b := make([]byte, 0, 256+len(p.rows)*512)
	b = append(b, `{"kind":`...)
	b = strconv.AppendQuote(b, q.res.gvk.Kind+"List")
	b = append(b, `,"apiVersion":`...)
	b = strconv.AppendQuote(b, q.res.apiVersion())
	b = append(b, `,"metadata":{"resourceVersion":"`...)
	b = strconv.AppendInt(b, p.rv, 10)
	b = append(b, '"')
	if p.next != "" {
		b = append(b, `,"continue":`...)
		b = strconv.AppendQuote(b, p.next)
	}
	b = append(b, `},"items":[`...)
	for i := range p.rows {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendObject(b, &p.rows[i], p.rows[i].Seq); err != nil {
			return err
		}
	}
	b = append(b, "]}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}

// get serves one object by name. Across clusters, a name may be in
// several: a Table holds every one (kubectl prints them all, each with its
// cluster); an object answer is the first by cluster name, and a warning
// names the others.
func (a *API) get(w http.ResponseWriter, req *request, q sel) error {
	if err := a.authorize(req.user, &q, "get"); err != nil {
		return err
	}
	p, err := a.read(req, &q, 0, "")
	if err != nil {
		return err
	}
	if len(p.rows) == 0 {
		what := q.res.plural
		if q.res.gvk.Group != "" {
			what += "." + q.res.gvk.Group
		}
		return statusErr(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("%s %q not found%s", what, q.name, clusterPhrase(req.cluster)))
	}
	slices.SortFunc(p.rows, func(x, y store.InventoryRow) int { return strings.Compare(x.Cluster, y.Cluster) })
	if len(p.rows) > 1 && asTable(req.r) == "" {
		var others []string
		for _, r := range p.rows[1:] {
			others = append(others, r.Cluster)
		}
		p.warnings = append(p.warnings, fmt.Sprintf("%s is in %d clusters; this is cluster %s's, also in %s (get it from %s{cluster}/...)",
			q.name, len(p.rows), p.rows[0].Cluster, strings.Join(others, ", "), PrefixCluster))
	}
	setWarnings(w, p.warnings)
	if asTable(req.r) != "" {
		return writeTable(w, a.table(q.res, p.rows, req.r, metav1.ListMeta{ResourceVersion: strconv.FormatInt(p.rv, 10)}))
	}
	b, err := appendObject(nil, &p.rows[0], p.rows[0].Seq)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}
