package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/clusters"
	"github.com/purser-io/purser/internal/placement"
	"github.com/purser-io/purser/internal/store"
)

// FieldManager names purser in the managedFields of what it creates.
const FieldManager = "purser"

// mapperRefresh is how often a kind a cluster did not serve may trigger a
// new discovery: often enough that a CRD installed a moment ago is found,
// rarely enough that a kind served nowhere does not cost a discovery per
// placement.
const mapperRefresh = 30 * time.Second

// clientCache keeps one dynamic client and RESTMapper per cluster, rebuilt
// when the cluster's kubeconfig changes, so that discovery is done once per
// cluster rather than once per runnable.
type clientCache struct {
	configs *clusters.Cache

	mu      sync.Mutex
	entries map[string]*clusterClient
}

type clusterClient struct {
	name   string
	sealed string // the kubeconfig the clients were built from
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper

	mu        sync.Mutex
	lastReset time.Time
}

func newClientCache(configs *clusters.Cache) *clientCache {
	return &clientCache{configs: configs, entries: map[string]*clusterClient{}}
}

func (c *clientCache) get(row *store.Cluster) (*clusterClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[row.Name]; ok && e.sealed == string(row.Kubeconfig) {
		return e, nil
	}
	cfg, err := c.configs.RESTConfig(row)
	if err != nil {
		return nil, err
	}
	clients, err := clusters.NewClients(row.Name, cfg)
	if err != nil {
		return nil, err
	}
	e := &clusterClient{
		name:      row.Name,
		sealed:    string(row.Kubeconfig),
		dyn:       clients.Dynamic,
		mapper:    clients.Mapper,
		lastReset: time.Now(),
	}
	c.entries[row.Name] = e
	return e, nil
}

// mapping resolves a kind on the cluster. A kind it does not know makes it
// discover again, at most every mapperRefresh, so that new CRDs are found.
func (cc *clusterClient) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := cc.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		cc.mu.Lock()
		stale := time.Since(cc.lastReset) > mapperRefresh
		if stale {
			cc.lastReset = time.Now()
		}
		cc.mu.Unlock()
		if stale {
			cc.mapper.Reset()
			m, err = cc.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cluster %s: resolve %s: %w", cc.name, gvk, err)
	}
	return m, nil
}

// serves answers placement's question without ever refusing a cluster
// for a reason other than a definite "no such kind": a discovery that
// fails says nothing about the kind, and the create will tell.
func (cc *clusterClient) serves(gvk schema.GroupVersionKind) bool {
	_, err := cc.mapping(gvk)
	return err == nil || !meta.IsNoMatchError(err)
}

// resource returns the client for the object's kind, and whether the kind
// is namespaced.
func (cc *clusterClient) resource(gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, bool, error) {
	m, err := cc.mapping(gvk)
	if err != nil {
		return nil, false, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return cc.dyn.Resource(m.Resource).Namespace(namespace), true, nil
	}
	return cc.dyn.Resource(m.Resource), false, nil
}

// create creates obj unless this runnable's object is already there, and
// returns the object's uid on the cluster. An object of that name which is
// not this runnable's is reported as a foreignObjectError and never
// touched.
func (cc *clusterClient) create(ctx context.Context, obj *unstructured.Unstructured, runnableUID string) (string, error) {
	gvk := obj.GroupVersionKind()
	ns := obj.GetNamespace()
	ri, namespaced, err := cc.resource(gvk, ns)
	if err != nil {
		return "", err
	}
	if !namespaced {
		obj.SetNamespace("")
	}
	opts := metav1.CreateOptions{FieldManager: FieldManager}
	out, err := ri.Create(ctx, obj, opts)
	if namespaced && apierrors.IsNotFound(err) {
		// The namespace is created on demand rather than checked before
		// every create: the common case then costs one request.
		if nsErr := cc.ensureNamespace(ctx, ns); nsErr != nil {
			return "", nsErr
		}
		out, err = ri.Create(ctx, obj, opts)
	}
	if apierrors.IsAlreadyExists(err) {
		existing, getErr := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if getErr != nil {
			// Deleted in between (NotFound is transient): the next try
			// creates it.
			return "", fmt.Errorf("read existing %s %s: %w", gvk.Kind, obj.GetName(), getErr)
		}
		if owner := existing.GetLabels()[v1alpha1.LabelRunnableUID]; owner != runnableUID {
			return "", &foreignObjectError{kind: gvk.Kind, namespace: existing.GetNamespace(), name: existing.GetName(), cluster: cc.name, owner: owner}
		}
		// Ours, from an earlier try whose answer was lost: success.
		return string(existing.GetUID()), nil
	}
	if err != nil {
		return "", err
	}
	return string(out.GetUID()), nil
}

func (cc *clusterClient) ensureNamespace(ctx context.Context, name string) error {
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(name)
	_, err := cc.dyn.Resource(corev1.SchemeGroupVersion.WithResource("namespaces")).
		Create(ctx, ns, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// remove deletes this runnable's object, if it is there and still this
// runnable's (the uid precondition makes sure a replacement of the same
// name is never deleted). It reports whether something was deleted.
func (cc *clusterClient) remove(ctx context.Context, gvk schema.GroupVersionKind, namespace, name, runnableUID string) (bool, error) {
	ri, _, err := cc.resource(gvk, namespace)
	if err != nil {
		return false, err
	}
	existing, err := ri.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if existing.GetLabels()[v1alpha1.LabelRunnableUID] != runnableUID {
		return false, nil
	}
	uid := existing.GetUID()
	background := metav1.DeletePropagationBackground
	err = ri.Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: &background,
		Preconditions:     &metav1.Preconditions{UID: &uid},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// markUnreachable keeps a cluster out of placement for unreachableFor.
func (s *Submitter) markUnreachable(cluster string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unreachable[cluster] = time.Now()
}

func (s *Submitter) markReachable(cluster string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.unreachable, cluster)
}

func (s *Submitter) recentlyUnreachable(cluster string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.unreachable[cluster]
	return ok && time.Since(at) < unreachableFor
}

// activePhases are the phases in which a runnable occupies its cluster.
var activePhases = []string{string(v1alpha1.PhaseScheduled), string(v1alpha1.PhaseSubmitted), string(v1alpha1.PhaseRunning)}

// candidates describes every registered cluster for placement.
func (s *Submitter) candidates(ctx context.Context, gvk schema.GroupVersionKind) ([]placement.Cluster, error) {
	var rows []*store.Cluster
	var active map[string]int
	var capacity map[string]store.Capacity
	err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		if rows, err = tx.ListClusters(ctx); err != nil {
			return err
		}
		if active, err = tx.CountRunnablesByCluster(ctx, activePhases...); err != nil {
			return err
		}
		capacity, err = tx.ClusterCapacity(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]placement.Cluster, 0, len(rows))
	for _, row := range rows {
		c := placement.Cluster{Name: row.Name, Labels: row.Labels, Active: active[row.Name]}
		if nodes, ok := capacity[row.Name]; ok {
			c.Capacity = &placement.Capacity{MilliCPU: nodes.MilliCPU}
		}
		var spec store.Document[v1alpha1.ClusterSpec]
		if err := json.Unmarshal(row.Spec, &spec); err != nil {
			s.log.Error("cluster spec does not decode; cluster skipped", "cluster", row.Name, "error", err)
			continue
		}
		c.Taints = append(c.Taints, spec.Spec.Taints...)
		var status v1alpha1.ClusterStatus
		if len(row.Status) > 0 {
			if err := json.Unmarshal(row.Status, &status); err != nil {
				s.log.Error("cluster status does not decode; cluster skipped", "cluster", row.Name, "error", err)
				continue
			}
		}
		c.Taints = append(c.Taints, status.Taints...)
		// No controller sets Ready yet, so only an explicit False keeps
		// work away; this submitter's own recent failures to reach the
		// cluster count as False.
		c.Ready = !s.recentlyUnreachable(row.Name)
		for _, cond := range status.Conditions {
			if cond.Type == v1alpha1.ConditionReady && cond.Status == metav1.ConditionFalse {
				c.Ready = false
			}
		}
		row := row
		c.Serves = func(string) bool {
			cc, err := s.clients.get(row)
			if err != nil {
				return true // the create reports the real problem
			}
			return cc.serves(gvk)
		}
		out = append(out, c)
	}
	return out, nil
}

// clusterRow reads one cluster; a removed cluster is ErrNotFound.
func (s *Submitter) clusterRow(ctx context.Context, name string) (*store.Cluster, error) {
	var row *store.Cluster
	err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		row, err = tx.GetCluster(ctx, name)
		return err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	return row, err
}
