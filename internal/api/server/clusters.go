package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/placement"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
)

// storedClusterSpec is the spec column of a cluster: everything but the
// kubeconfig, which is sealed in its own column.
type storedClusterSpec struct {
	Annotations map[string]string    `json:"annotations,omitempty"`
	Spec        v1alpha1.ClusterSpec `json:"spec"`
}

// createCluster serves POST /api/v1/clusters (admins only).
func (s *Server) createCluster(r *http.Request, u policy.User) (int, any, error) {
	if !s.policy().IsAdmin(u) {
		return 0, nil, errForbidden("user %q may not register clusters; only admins may", u.Name)
	}
	obj, err := decodeBody(r, v1alpha1.DecodeCluster)
	if err != nil {
		return 0, nil, err
	}
	if errs := v1alpha1.ValidateCluster(obj); len(errs) > 0 {
		return 0, nil, errInvalid("Cluster is invalid", errs)
	}
	rec, err := s.clusterRecord(obj, nil)
	if err != nil {
		return 0, nil, err
	}
	err = s.tx(r.Context(), func(tx *store.Tx) error {
		if err := tx.Clusters().Create(r.Context(), rec); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return errConflict("cluster %s is already registered; update it with PUT /api/v1/clusters/%s", rec.Name, rec.Name)
			}
			return err
		}
		if err := enqueueAgentSettings(r.Context(), tx, rec, obj.Spec); err != nil {
			return err
		}
		return appendAudit(r.Context(), tx, u, "create", v1alpha1.KindCluster, "", rec.Name,
			fmt.Sprintf("registered cluster %s (labels %s%s)", rec.Name, formatLabels(rec.Labels), inventoryPhrase(obj.Spec)), "Registered", clusterDetails(obj))
	})
	if err != nil {
		return 0, nil, err
	}
	s.notifyOutbox()
	out, err := clusterFromRecord(rec)
	return http.StatusCreated, out, err
}

// updateCluster serves PUT /api/v1/clusters/{name}: labels, taints, and the
// kubeconfig when one is given (an empty one keeps the stored one, so that
// a cluster read from the API, which never returns it, can be edited and
// put back). A body with metadata.resourceVersion is a precondition: 409
// when the cluster changed since, so that read-modify-write clients (the
// CLI's label, taint and cordon, the console) never undo another's change.
// A PUT that changes nothing writes nothing, not even an audit entry.
func (s *Server) updateCluster(r *http.Request, u policy.User) (int, any, error) {
	name := r.PathValue("name")
	if !s.policy().IsAdmin(u) {
		return 0, nil, errForbidden("user %q may not change clusters; only admins may", u.Name)
	}
	obj, err := decodeBody(r, v1alpha1.DecodeCluster)
	if err != nil {
		return 0, nil, err
	}
	if obj.Metadata.Name == "" {
		obj.Metadata.Name = name
	}
	// The URL names the cluster being changed; ValidateClusterUpdate says
	// so when the body names another.
	urlCluster := &v1alpha1.Cluster{Metadata: v1alpha1.ObjectMeta{Name: name}}
	if errs := v1alpha1.ValidateClusterUpdate(urlCluster, obj); len(errs) > 0 {
		return 0, nil, errInvalid("Cluster is invalid", errs)
	}
	var rec *store.Cluster
	settingsChanged := false
	err = s.tx(r.Context(), func(tx *store.Tx) error {
		settingsChanged = false
		old, err := tx.Clusters().Get(r.Context(), name)
		if err != nil {
			return err
		}
		if rv := obj.Metadata.ResourceVersion; rv != "" && rv != strconv.FormatInt(old.ResourceVersion, 10) {
			return errConflict("cluster %s changed since resourceVersion %s (it is at %d now); read it again and redo the change", name, rv, old.ResourceVersion)
		}
		if rec, err = s.clusterRecord(obj, old); err != nil {
			return err
		}
		if same, err := s.sameCluster(old, rec, obj.Spec.Kubeconfig); err != nil || same {
			rec = old
			return err
		}
		oldObj, err := clusterFromRecord(old)
		if err != nil {
			return err
		}
		if err := tx.Clusters().Update(r.Context(), rec); err != nil {
			return err
		}
		summary := fmt.Sprintf("updated cluster %s (labels %s, %d taints%s", name, formatLabels(rec.Labels), len(obj.Spec.Taints), inventoryPhrase(obj.Spec))
		if obj.Spec.Kubeconfig != "" {
			summary += ", new kubeconfig"
		}
		if !slices.Equal(oldObj.Spec.InventoryKindsOf(), obj.Spec.InventoryKindsOf()) {
			if err := enqueueAgentSettings(r.Context(), tx, rec, obj.Spec); err != nil {
				return err
			}
			settingsChanged = true
		}
		return appendAudit(r.Context(), tx, u, "update", v1alpha1.KindCluster, "", name, summary+")", "Updated", clusterDetails(obj))
	})
	if settingsChanged && err == nil {
		s.notifyOutbox()
	}
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("cluster %s is not registered; register it with POST /api/v1/clusters", name)
	}
	if err != nil {
		return 0, nil, err
	}
	out, err := clusterFromRecord(rec)
	return http.StatusOK, out, err
}

func (s *Server) deleteCluster(r *http.Request, u policy.User) (int, any, error) {
	name := r.PathValue("name")
	if !s.policy().IsAdmin(u) {
		return 0, nil, errForbidden("user %q may not remove clusters; only admins may", u.Name)
	}
	err := s.tx(r.Context(), func(tx *store.Tx) error {
		if err := tx.Clusters().Delete(r.Context(), name); err != nil {
			return err
		}
		return appendAudit(r.Context(), tx, u, "delete", v1alpha1.KindCluster, "", name, "removed cluster "+name, "Removed", nil)
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("cluster %s is not registered", name)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]string{"status": "removed", "cluster": name}, nil
}

// Every authenticated user may see the clusters: where work can go is no
// secret, and kubeconfigs are never returned. What failed, in words, is
// for admins alone (hideClusterDetail).
func (s *Server) getCluster(r *http.Request, u policy.User) (int, any, error) {
	name := r.PathValue("name")
	var rec *store.Cluster
	var obs observations
	err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		if rec, err = tx.Clusters().Get(r.Context(), name); err != nil {
			return err
		}
		obs, err = s.readObservations(r, tx)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, errNotFound("cluster %s is not registered", name)
	}
	if err != nil {
		return 0, nil, err
	}
	out, err := clusterFromRecord(rec)
	if err != nil {
		return 0, nil, err
	}
	obs.apply(out, s.seesClusterDetail(u))
	return http.StatusOK, out, nil
}

func (s *Server) listClusters(r *http.Request, u policy.User) (int, any, error) {
	var recs []*store.Cluster
	var obs observations
	if err := s.cfg.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		if recs, err = tx.Clusters().List(r.Context()); err != nil {
			return err
		}
		obs, err = s.readObservations(r, tx)
		return err
	}); err != nil {
		return 0, nil, err
	}
	out := List[*v1alpha1.Cluster]{Items: make([]*v1alpha1.Cluster, 0, len(recs))}
	detail := s.seesClusterDetail(u)
	for _, rec := range recs {
		obj, err := clusterFromRecord(rec)
		if err != nil {
			return 0, nil, err
		}
		obs.apply(obj, detail)
		out.Items = append(out.Items, obj)
	}
	return http.StatusOK, out, nil
}

// observations are what the inventory knows of the clusters (when their
// agents were last heard from and what they said, how many records each
// has, what their nodes can allocate and which runnables are on them) and
// what each DC's controller last saw of them.
type observations struct {
	fresh     map[string]store.AgentFreshness
	counts    map[string]int64
	capacity  map[string]store.Capacity
	reports   map[string]store.CapacityReport
	runnables map[string]map[string]int
	views     map[string][]v1alpha1.ClusterView
	now       time.Time
}

func (s *Server) readObservations(r *http.Request, tx *store.Tx) (observations, error) {
	o := observations{now: s.now()}
	var err error
	if o.fresh, err = tx.Agents().ListFreshness(r.Context()); err != nil {
		return o, err
	}
	if o.counts, err = tx.Inventory().CountByCluster(r.Context()); err != nil {
		return o, err
	}
	if o.capacity, err = tx.Clusters().Capacity(r.Context()); err != nil {
		return o, err
	}
	if o.runnables, err = tx.Runnables().CountByClusterPhase(r.Context()); err != nil {
		return o, err
	}
	if o.reports, err = tx.Agents().Capacities(r.Context()); err != nil {
		return o, err
	}
	views, _, err := tx.Clusters().ListViews(r.Context())
	o.views = map[string][]v1alpha1.ClusterView{}
	for _, v := range views {
		o.views[v.Cluster] = append(o.views[v.Cluster], v1alpha1.ClusterView{
			DC: v.Observer, Outcome: v.Outcome, Detail: v.Detail, ObservedAt: v.ObservedAt, FailingSince: v.FailingSince,
		})
	}
	return o, err
}

// apply fills c's status with what was observed of it; without detail,
// as a tenant sees it (hideClusterDetail).
func (o observations) apply(c *v1alpha1.Cluster, detail bool) {
	name := c.Metadata.Name
	c.Status.Agent = agentStatus(o.fresh[name], o.now, detail)
	c.Status.Inventory = &v1alpha1.InventoryStatus{Objects: o.counts[name]}
	c.Status.State = v1alpha1.ClusterState(c.Status)
	if n, ok := o.capacity[name]; ok {
		c.Status.Capacity = &v1alpha1.ClusterCapacity{MilliCPU: n.MilliCPU, MemoryBytes: n.Memory, Pods: n.Pods,
			Nodes: n.Nodes, Unschedulable: n.Unschedulable}
	}
	if rep, ok := o.reports[name]; ok {
		var capa stream.Capacity
		if json.Unmarshal(rep.Report, &capa) == nil {
			c.Status.Resources = &v1alpha1.ClusterResources{Allocatable: placement.Strings(capa.Allocatable),
				Free: placement.Strings(capa.Free), ReportedAt: rep.At}
		}
	}
	c.Status.Views = slices.Clone(o.views[name])
	if !detail {
		hideClusterDetail(&c.Status)
	}
	if byPhase := o.runnables[name]; len(byPhase) > 0 {
		c.Status.Runnables = make(map[v1alpha1.Phase]int, len(byPhase))
		for p, n := range byPhase {
			c.Status.Runnables[v1alpha1.Phase(p)] = n
		}
	}
}

// agentStatus is what the API shows of a cluster's agent, with the
// freshness judged at now; without detail, the agent's error reaching its
// kube-apiserver is left out, of the report and of the judgement's words
// (hideClusterDetail says why). An agent that says nothing of its
// kube-apiserver (one older than that report) was current at its last
// heartbeat, as far as anyone can tell.
func agentStatus(f store.AgentFreshness, now time.Time, detail bool) *v1alpha1.AgentStatus {
	a := &v1alpha1.AgentStatus{LastHeartbeat: f.LastHeartbeat, LastSnapshot: f.LastSnapshot, LastEvent: f.LastEvent,
		CurrentUntil: f.CurrentUntil}
	if len(f.KubeAPI) > 0 {
		var k v1alpha1.AgentKubeAPI
		if json.Unmarshal(f.KubeAPI, &k) == nil {
			if !detail {
				k.Error = ""
			}
			a.KubeAPI = &k
		}
	}
	if a.KubeAPI == nil && a.CurrentUntil == nil {
		a.CurrentUntil = f.LastHeartbeat
	}
	fr := v1alpha1.JudgeFreshness(a, now)
	a.Freshness = &fr
	return a
}

// clusterRecord builds the row for obj, sealing its kubeconfig, or keeping
// old's when obj carries none.
func (s *Server) clusterRecord(obj *v1alpha1.Cluster, old *store.Cluster) (*store.Cluster, error) {
	name := obj.Metadata.Name
	rec := &store.Cluster{Name: name, Labels: obj.Metadata.Labels}
	if old != nil {
		*rec = *old
		rec.Labels = obj.Metadata.Labels
	}
	if obj.Spec.Kubeconfig != "" {
		sealed, err := s.cfg.Sealer.Seal([]byte(obj.Spec.Kubeconfig), seal.KubeconfigBinding(name))
		if err != nil {
			return nil, err
		}
		rec.Kubeconfig = sealed
	}
	spec := obj.Spec
	spec.Kubeconfig = ""
	doc, err := json.Marshal(storedClusterSpec{Annotations: obj.Metadata.Annotations, Spec: spec})
	if err != nil {
		return nil, err
	}
	rec.Spec = doc
	return rec, nil
}

// sameCluster reports whether the row rec, built from an update, holds
// what old holds: the same labels, spec and annotations, and no kubeconfig
// or the same one (compared opened, since every seal differs).
func (s *Server) sameCluster(old, rec *store.Cluster, kubeconfig string) (bool, error) {
	if !maps.Equal(old.Labels, rec.Labels) {
		return false, nil
	}
	if !bytes.Equal(old.Spec, rec.Spec) {
		return false, nil
	}
	if kubeconfig == "" {
		return true, nil
	}
	stored, err := s.cfg.Sealer.Open(old.Kubeconfig, seal.KubeconfigBinding(old.Name))
	if err != nil {
		return false, nil // unreadable: replace it
	}
	return string(stored) == kubeconfig, nil
}

// clusterDetails is what the audit log keeps of a cluster change: never
// the kubeconfig.
func clusterDetails(obj *v1alpha1.Cluster) any {
	d := map[string]any{"labels": obj.Metadata.Labels, "taints": obj.Spec.Taints}
	if k := obj.Spec.InventoryKindsOf(); k != nil {
		d["inventoryKinds"] = k
	}
	return d
}

func inventoryPhrase(spec v1alpha1.ClusterSpec) string {
	if k := spec.InventoryKindsOf(); k != nil {
		return ", also tracking " + strings.Join(k, ", ")
	}
	return ""
}

// enqueueAgentSettings puts what the cluster's agent is asked to do (the
// kinds of spec.inventory.kinds) in the outbox, in the transaction of the
// Cluster's change: the relay publishes it to the cluster's key of
// stream.AgentSettingsBucket, which the agent watches. The message id
// names the cluster's registration and resourceVersion, so that a
// re-registered cluster's first settings are not taken for a duplicate.
func enqueueAgentSettings(ctx context.Context, tx *store.Tx, rec *store.Cluster, spec v1alpha1.ClusterSpec) error {
	data, err := json.Marshal(stream.AgentSettings{Cluster: rec.Name, Kinds: spec.InventoryKindsOf(), Generation: rec.ResourceVersion})
	if err != nil {
		return err
	}
	return tx.Outbox().Enqueue(ctx, &store.OutboxMessage{Subject: stream.AgentSettingsSubject(rec.Name),
		MsgID: fmt.Sprintf("%s/settings/%d/%d", rec.Name, rec.CreatedAt.UnixNano(), rec.ResourceVersion), Data: data})
}

func clusterFromRecord(rec *store.Cluster) (*v1alpha1.Cluster, error) {
	var doc storedClusterSpec
	if err := json.Unmarshal(rec.Spec, &doc); err != nil {
		return nil, fmt.Errorf("cluster %s: stored spec: %w", rec.Name, err)
	}
	var st v1alpha1.ClusterStatus
	if len(rec.Status) > 0 {
		if err := json.Unmarshal(rec.Status, &st); err != nil {
			return nil, fmt.Errorf("cluster %s: stored status: %w", rec.Name, err)
		}
	}
	return &v1alpha1.Cluster{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindCluster},
		Metadata: v1alpha1.ObjectMeta{
			Name: rec.Name, Labels: rec.Labels, Annotations: doc.Annotations,
			ResourceVersion: strconv.FormatInt(rec.ResourceVersion, 10), CreationTimestamp: rec.CreatedAt,
		},
		Spec:   doc.Spec,
		Status: st,
	}, nil
}

func formatLabels(l map[string]string) string {
	if len(l) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(l))
	for k, v := range l {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
