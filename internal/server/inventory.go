package server

import (
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/auth"
	"github.com/purser-io/purser/internal/store"
)

// InventoryItem is one record of the inventory as the API shows it.
type InventoryItem struct {
	Cluster         string            `json:"cluster"`
	APIVersion      string            `json:"apiVersion"`
	Kind            string            `json:"kind"`
	Namespace       string            `json:"namespace,omitempty"`
	Name            string            `json:"name"`
	UID             string            `json:"uid"`
	ResourceVersion string            `json:"resourceVersion"`
	Labels          map[string]string `json:"labels,omitempty"`
	Health          string            `json:"health"`
	Phase           string            `json:"phase,omitempty"`
	ObservedAt      time.Time         `json:"observedAt"`
	Object          json.RawMessage   `json:"object,omitempty"`
}

// ClusterFreshness says how fresh one cluster's records are, so that a
// reader can tell a current answer from an old one.
type ClusterFreshness struct {
	Cluster       string     `json:"cluster"`
	Ready         bool       `json:"ready"`
	LastHeartbeat *time.Time `json:"lastHeartbeat,omitempty"`
	LastSnapshot  *time.Time `json:"lastSnapshot,omitempty"`
	LastEvent     *time.Time `json:"lastEvent,omitempty"`
}

// InventoryList is the answer of GET /api/v1/inventory.
type InventoryList struct {
	Items    []InventoryItem    `json:"items"`
	Continue string             `json:"continue,omitempty"`
	Clusters []ClusterFreshness `json:"clusters"`
}

// listInventory serves GET /api/v1/inventory from the database alone: it
// answers for a cluster whose API server is down, with that cluster's
// freshness beside the records.
func (s *Server) listInventory(r *http.Request, u auth.User) (int, any, error) {
	q := r.URL.Query()
	f := store.InventoryFilter{
		Cluster: q.Get("cluster"), APIVersion: q.Get("apiVersion"), Kind: q.Get("kind"),
		Namespace: q.Get("namespace"), Name: q.Get("name"), Health: q.Get("health"),
		Continue: q.Get("continue"), WithoutObject: q.Get("fields") == "meta",
	}
	if err := s.authorizeList(u, f.Namespace, "the inventory"); err != nil {
		return 0, nil, err
	}
	if f.Health != "" {
		switch v1alpha1.Health(f.Health) {
		case v1alpha1.HealthHealthy, v1alpha1.HealthUnhealthy, v1alpha1.HealthUnknown:
		default:
			return 0, nil, errBadRequest("health must be Healthy, Unhealthy or Unknown, got %q", f.Health)
		}
	}
	if v := q.Get("fields"); v != "" && v != "meta" {
		return 0, nil, errBadRequest("fields may only be meta (records without their objects), got %q", v)
	}
	if sel := q.Get("labelSelector"); sel != "" {
		parsed, err := labels.Parse(sel)
		if err != nil {
			return 0, nil, errBadRequest("labelSelector: %v", err)
		}
		reqs, _ := parsed.Requirements()
		for _, req := range reqs {
			if op := req.Operator(); op == selection.GreaterThan || op == selection.LessThan {
				return 0, nil, errBadRequest("labelSelector: operator %s is not supported; use =, !=, in, notin, exists", op)
			}
		}
		f.Selector = parsed
	}
	if q.Get("watch") == "true" {
		return http.StatusOK, streamFunc(func(w http.ResponseWriter) error { return s.watchInventory(w, r, u, f) }), nil
	}
	var err error
	if f.Limit, err = parseLimit(q.Get("limit")); err != nil {
		return 0, nil, err
	}

	var rows []store.InventoryRow
	var next string
	var fresh map[string]store.AgentFreshness
	var clusters []*store.Cluster
	err = s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		if rows, next, err = tx.ListInventory(r.Context(), f); err != nil {
			return err
		}
		if fresh, err = tx.ListAgentFreshness(r.Context()); err != nil {
			return err
		}
		clusters, err = tx.ListClusters(r.Context())
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	out := InventoryList{Items: make([]InventoryItem, 0, len(rows)), Continue: next, Clusters: []ClusterFreshness{}}
	touched := map[string]bool{}
	if f.Cluster != "" {
		touched[f.Cluster] = true
	}
	for _, row := range rows {
		touched[row.Cluster] = true
		out.Items = append(out.Items, inventoryItem(row))
	}
	ready := map[string]bool{}
	for _, c := range clusters {
		ready[c.Name] = clusterReady(c, fresh[c.Name], s.now())
	}
	for _, c := range sortedKeys(touched) {
		a := fresh[c]
		out.Clusters = append(out.Clusters, ClusterFreshness{Cluster: c, Ready: ready[c],
			LastHeartbeat: a.LastHeartbeat, LastSnapshot: a.LastSnapshot, LastEvent: a.LastEvent})
	}
	return http.StatusOK, &out, nil
}

// appendJSON appends l as encoding/json writes it (compact, the same
// fields in the same order, the same escaping; TestInventoryListJSON
// compares), except that each item's object is copied as stored. It is
// JSON already: the ingester decoded it from the agent's event before
// storing it. Encoding a json.RawMessage scans, validates and compacts it
// again, which was three quarters of the time of encoding a page of
// ConfigMaps.
func (l *InventoryList) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"items":[`...)
	for i := range l.Items {
		if i > 0 {
			b = append(b, ',')
		}
		b = l.Items[i].appendJSON(b)
	}
	b = append(b, ']')
	if l.Continue != "" {
		b = append(b, `,"continue":`...)
		b = appendJSONString(b, l.Continue)
	}
	clusters, err := json.Marshal(l.Clusters)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"clusters":`...)
	b = append(b, clusters...)
	return append(b, '}'), nil
}

func (it *InventoryItem) appendJSON(b []byte) []byte {
	b = append(b, `{"cluster":`...)
	b = appendJSONString(b, it.Cluster)
	b = append(b, `,"apiVersion":`...)
	b = appendJSONString(b, it.APIVersion)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, it.Kind)
	if it.Namespace != "" {
		b = append(b, `,"namespace":`...)
		b = appendJSONString(b, it.Namespace)
	}
	b = append(b, `,"name":`...)
	b = appendJSONString(b, it.Name)
	b = append(b, `,"uid":`...)
	b = appendJSONString(b, it.UID)
	b = append(b, `,"resourceVersion":`...)
	b = appendJSONString(b, it.ResourceVersion)
	if len(it.Labels) > 0 {
		b = append(b, `,"labels":{`...)
		keys := make([]string, 0, len(it.Labels))
		for k := range it.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, it.Labels[k])
		}
		b = append(b, '}')
	}
	b = append(b, `,"health":`...)
	b = appendJSONString(b, it.Health)
	if it.Phase != "" {
		b = append(b, `,"phase":`...)
		b = appendJSONString(b, it.Phase)
	}
	b = append(b, `,"observedAt":"`...)
	b = it.ObservedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if len(it.Object) > 0 {
		b = append(b, `,"object":`...)
		b = append(b, it.Object...)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string. Names, labels and versions
// are plain ASCII, copied as they are; anything else (quotes, control
// characters, HTML's <, > and &, which encoding/json escapes, non-ASCII)
// goes through encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// heartbeatStale is how old an agent's last heartbeat may be before its
// cluster's records count as not ready: three heartbeats missed.
const heartbeatStale = 30 * time.Second

// clusterReady says whether a cluster's records can be taken as current:
// its agent heartbeats, and its Ready condition, where one is set, is
// True.
func clusterReady(c *store.Cluster, a store.AgentFreshness, now time.Time) bool {
	if a.LastHeartbeat == nil || now.Sub(*a.LastHeartbeat) > heartbeatStale {
		return false
	}
	var st v1alpha1.ClusterStatus
	if len(c.Status) > 0 && json.Unmarshal(c.Status, &st) != nil {
		return false
	}
	for _, cond := range st.Conditions {
		if cond.Type == v1alpha1.ConditionReady {
			return cond.Status == "True"
		}
	}
	return true
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
