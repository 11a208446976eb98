package server

import (
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
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
	// Health and Phase are empty for objects that have none (a ConfigMap).
	Health     string    `json:"health,omitempty"`
	Phase      string    `json:"phase,omitempty"`
	ObservedAt time.Time `json:"observedAt"`
	// SeenAt is the last moment the record was known to be the object's
	// state: the later of ObservedAt (its last change) and its cluster's
	// freshness.currentUntil (v1alpha1.Freshness).
	SeenAt time.Time       `json:"seenAt"`
	Object json.RawMessage `json:"object,omitempty"`
}

// ClusterFreshness says how fresh one cluster's records are, so that a
// reader can tell a current answer from an old one.
type ClusterFreshness struct {
	Cluster string `json:"cluster"`
	// Ready: the records are fresh and the cluster is not NotReady.
	Ready bool `json:"ready"`
	// State is v1alpha1.ClusterState: Ready, NotReady or Unknown.
	State         string                 `json:"state"`
	Freshness     v1alpha1.Freshness     `json:"freshness"`
	KubeAPI       *v1alpha1.AgentKubeAPI `json:"kubeAPI,omitempty"`
	LastHeartbeat *time.Time             `json:"lastHeartbeat,omitempty"`
	LastSnapshot  *time.Time             `json:"lastSnapshot,omitempty"`
	LastEvent     *time.Time             `json:"lastEvent,omitempty"`
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
func (s *Server) listInventory(r *http.Request, u policy.User) (int, any, error) {
	q := r.URL.Query()
	f := store.InventoryFilter{
		Cluster: q.Get("cluster"), APIVersion: q.Get("apiVersion"), Kind: q.Get("kind"),
		Namespace: q.Get("namespace"), Name: q.Get("name"), Health: q.Get("health"),
		Continue: q.Get("continue"), WithoutObject: q.Get("fields") == "meta",
	}
	switch v := q.Get("system"); v {
	case "", "false":
	case "true":
		f.System = true
	default:
		return 0, nil, errBadRequest("system must be true or false, got %q", v)
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
		if rows, next, err = tx.Inventory().List(r.Context(), f); err != nil {
			return err
		}
		if fresh, err = tx.Agents().ListFreshness(r.Context()); err != nil {
			return err
		}
		clusters, err = tx.Clusters().List(r.Context())
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	out := InventoryList{Items: make([]InventoryItem, 0, len(rows)), Continue: next, Clusters: []ClusterFreshness{}}
	detail := s.seesClusterDetail(u)
	judged := judgeClusters(clusters, fresh, s.now(), detail)
	touched := map[string]bool{}
	if f.Cluster != "" {
		touched[f.Cluster] = true
	}
	for _, row := range rows {
		touched[row.Cluster] = true
		out.Items = append(out.Items, inventoryItem(row, judged[row.Cluster].Freshness.CurrentUntil))
	}
	for _, c := range sortedKeys(touched) {
		j, ok := judged[c]
		if !ok { // records of a cluster no longer registered
			j = judgeCluster(c, nil, fresh[c], s.now(), detail)
		}
		out.Clusters = append(out.Clusters, j)
	}
	return http.StatusOK, &out, nil
}

// judgeClusters judges every registered cluster's records at now, with
// the detail of what failed or without (agentStatus).
func judgeClusters(clusters []*store.Cluster, fresh map[string]store.AgentFreshness, now time.Time, detail bool) map[string]ClusterFreshness {
	out := make(map[string]ClusterFreshness, len(clusters))
	for _, c := range clusters {
		out[c.Name] = judgeCluster(c.Name, c, fresh[c.Name], now, detail)
	}
	return out
}

// judgeCluster is one cluster's entry of an inventory answer, by the rule
// the clusters API serves (agentStatus, v1alpha1.JudgeFreshness).
func judgeCluster(name string, c *store.Cluster, f store.AgentFreshness, now time.Time, detail bool) ClusterFreshness {
	a := agentStatus(f, now, detail)
	var st v1alpha1.ClusterStatus
	if c != nil && len(c.Status) > 0 {
		_ = json.Unmarshal(c.Status, &st) // an unreadable status is no condition: Unknown
	}
	state := v1alpha1.ClusterState(st)
	return ClusterFreshness{Cluster: name, Ready: a.Freshness.Fresh && state != v1alpha1.ClusterNotReady, State: state,
		Freshness: *a.Freshness, KubeAPI: a.KubeAPI,
		LastHeartbeat: a.LastHeartbeat, LastSnapshot: a.LastSnapshot, LastEvent: a.LastEvent}
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
	if it.Health != "" {
		b = append(b, `,"health":`...)
		b = appendJSONString(b, it.Health)
	}
	if it.Phase != "" {
		b = append(b, `,"phase":`...)
		b = appendJSONString(b, it.Phase)
	}
	b = append(b, `,"observedAt":"`...)
	b = it.ObservedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","seenAt":"`...)
	b = it.SeenAt.AppendFormat(b, time.RFC3339Nano)
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

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
