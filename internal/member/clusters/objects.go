package clusters

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
)

// FieldManager names purser in the managedFields of what it creates.
const FieldManager = "purser"

// mapperRefresh is how often a kind a cluster did not serve may trigger a
// new discovery: often enough that a CRD installed a moment ago is found,
// rarely enough that a kind served nowhere does not cost a discovery per
// request.
const mapperRefresh = 30 * time.Second

// Objects keeps one ObjectClient per cluster, rebuilt when the cluster's
// kubeconfig changes, so that discovery is done once per cluster rather
// than once per object. It is what the submitter and the controller create
// and remove runnables' objects with.
type Objects struct {
	configs *Cache
	// NamespaceLabels, when set, gives the labels of a namespace that
	// its clients create on a cluster (ObjectClient.NamespaceLabels).
	NamespaceLabels func(namespace string) map[string]string

	mu      sync.Mutex
	entries map[string]*ObjectClient
}

// ObjectClient creates and removes objects of any kind on one cluster,
// and resolves kinds for those who watch and apply them through its
// dynamic client (the syncer), so that every component asks discovery
// again under the same limit.
type ObjectClient struct {
	name   string
	sealed string // the kubeconfig the clients were built from
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	// refresh is mapperRefresh; a test shortens or lengthens it.
	refresh time.Duration

	mu        sync.Mutex
	lastReset time.Time
	// served remembers the kinds the mapper resolved since its last
	// reset: placement asks Serves of every cluster for every runnable,
	// and a lookup through the mapper's groups costs tens of
	// microseconds each time.
	served map[schema.GroupVersionKind]bool
	// limiter is the dynamic client's rate limit, which CreateMarked
	// waits on itself so that its caller records a create only once it
	// can leave.
	limiter *prepaidLimiter
	// NamespaceLabels, when set, gives the labels of a namespace this
	// client creates: the Pod Security level purser holds its pods to,
	// which the cluster's own admission then enforces too.
	NamespaceLabels func(namespace string) map[string]string
}

// NewObjectClient builds the clients of the cluster name from its
// configuration. Discovery happens on first use and is cached for the
// life of the client.
func NewObjectClient(name string, cfg *rest.Config) (*ObjectClient, error) {
	limiter := newPrepaidLimiter(cfg)
	dcfg := rest.CopyConfig(cfg)
	dcfg.RateLimiter = limiter
	dyn, err := dynamic.NewForConfig(dcfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: dynamic client: %w", name, err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: discovery client: %w", name, err)
	}
	return &ObjectClient{
		name:      name,
		dyn:       dyn,
		mapper:    restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		refresh:   mapperRefresh,
		lastReset: time.Now(),
		limiter:   limiter,
	}, nil
}

// CreateMarked is Create for a caller that records every create before it
// leaves: beforeSend runs once the client's rate limit lets a request go,
// just before the create is sent, and an error from it sends nothing. All
// that Create then sends leaves within Timeout of beforeSend: a queue in
// front of the rate limit delays the record, not the create after it.
func (c *ObjectClient) CreateMarked(ctx context.Context, obj *unstructured.Unstructured, runnableUID string, beforeSend func() error) (string, error) {
	if err := c.limiter.waitPrepaid(ctx); err != nil {
		return "", fmt.Errorf("cluster %s: waiting for the client's rate limit: %w", c.name, err)
	}
	if err := beforeSend(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(prepay(ctx), Timeout)
	defer cancel()
	return c.Create(ctx, obj, runnableUID)
}

// NewObjects returns an empty set of clients built from configs.
func NewObjects(configs *Cache) *Objects {
	return &Objects{configs: configs, entries: map[string]*ObjectClient{}}
}

// Get returns the client of the cluster row describes.
func (o *Objects) Get(row *store.Cluster) (*ObjectClient, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e, ok := o.entries[row.Name]; ok && e.sealed == string(row.Kubeconfig) {
		return e, nil
	}
	cfg, err := o.configs.RESTConfig(row)
	if err != nil {
		return nil, err
	}
	e, err := NewObjectClient(row.Name, cfg)
	if err != nil {
		return nil, err
	}
	e.sealed = string(row.Kubeconfig)
	e.NamespaceLabels = o.NamespaceLabels
	o.entries[row.Name] = e
	return e, nil
}

// Dynamic is the client for what ObjectClient has no method of its own
// for: watches, lists, server-side apply.
func (c *ObjectClient) Dynamic() dynamic.Interface { return c.dyn }

// Mapping resolves a kind on the cluster. A kind it does not know makes it
// discover again, at most every mapperRefresh, so that new CRDs are found
// without a discovery per request for a kind served nowhere. The error is
// the mapper's (meta.IsNoMatchError tells a kind not served).
func (c *ObjectClient) Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) && c.mayRediscover() {
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return m, err
}

// DiscoveredSince reports whether what the client says of the kinds the
// cluster serves comes from a discovery asked after t: the mapper is
// reset, and discovers again on its next use, at most every refresh, so
// a "not served" may be older than a CRD installed a moment ago.
func (c *ObjectClient) DiscoveredSince(t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastReset.After(t)
}

// Rediscover is for a caller whose request to a resolved kind was answered
// NotFound: the kind may have gone with its CRD. Discovery is asked again
// on the next Mapping, under the same limit as for an unknown kind; a
// caller that retries finds out within mapperRefresh.
func (c *ObjectClient) Rediscover() { c.mayRediscover() }

// mayRediscover resets the mapper unless it was reset less than refresh
// ago, and reports whether it did.
func (c *ObjectClient) mayRediscover() bool {
	c.mu.Lock()
	stale := time.Since(c.lastReset) > c.refresh
	if stale {
		c.lastReset = time.Now()
		c.served = nil // the kinds are discovered again
	}
	c.mu.Unlock()
	if stale {
		c.mapper.Reset()
	}
	return stale
}

// Serves answers placement's question without ever refusing a cluster for
// a reason other than a definite "no such kind": a discovery that fails
// says nothing about the kind, and the create will tell.
func (c *ObjectClient) Serves(gvk schema.GroupVersionKind) bool {
	c.mu.Lock()
	known := c.served[gvk]
	c.mu.Unlock()
	if known {
		return true
	}
	_, err := c.Mapping(gvk)
	if err == nil {
		c.mu.Lock()
		if c.served == nil {
			c.served = map[schema.GroupVersionKind]bool{}
		}
		c.served[gvk] = true
		c.mu.Unlock()
	}
	return err == nil || !meta.IsNoMatchError(err)
}

// Namespaced reports whether the cluster serves gvk as a namespaced kind
// (RESTScopeNamespace) rather than a cluster-scoped one, as its discovery
// says: the scope the create will use.
func (c *ObjectClient) Namespaced(gvk schema.GroupVersionKind) (bool, error) {
	m, err := c.Mapping(gvk)
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// resource returns the client for the object's kind, and whether the kind
// is namespaced.
func (c *ObjectClient) resource(gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, bool, error) {
	m, err := c.Mapping(gvk)
	if err != nil {
		return nil, false, fmt.Errorf("cluster %s: resolve %s: %w", c.name, gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dyn.Resource(m.Resource).Namespace(namespace), true, nil
	}
	return c.dyn.Resource(m.Resource), false, nil
}

// ForeignObjectError says that an object of the name purser wanted to use
// exists and is not the runnable's: it is never touched.
type ForeignObjectError struct {
	Kind, Namespace, Name, Cluster string
	Owner                          string // the runnable uid it carries, if any
}

func (e *ForeignObjectError) Error() string {
	ref := e.Kind + " " + e.Name
	if e.Namespace != "" {
		ref = e.Kind + " " + e.Namespace + "/" + e.Name
	}
	if e.Owner != "" {
		return fmt.Sprintf("%s exists on cluster %s and belongs to another runnable (uid %s); it was left untouched", ref, e.Cluster, e.Owner)
	}
	return fmt.Sprintf("%s exists on cluster %s and was not created by purser; it was left untouched", ref, e.Cluster)
}

// Create creates obj unless this runnable's object is already there, and
// returns the object's uid on the cluster. An object of that name which is
// not this runnable's is reported as a *ForeignObjectError and never
// touched.
func (c *ObjectClient) Create(ctx context.Context, obj *unstructured.Unstructured, runnableUID string) (string, error) {
	gvk := obj.GroupVersionKind()
	ns := obj.GetNamespace()
	ri, namespaced, err := c.resource(gvk, ns)
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
		if nsErr := c.EnsureNamespace(ctx, ns); nsErr != nil {
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
			return "", &ForeignObjectError{Kind: gvk.Kind, Namespace: existing.GetNamespace(), Name: existing.GetName(), Cluster: c.name, Owner: owner}
		}
		if err := olderAttempt(existing, obj, c.name); err != nil {
			return "", err
		}
		// Ours, from an earlier try whose answer was lost: success.
		return string(existing.GetUID()), nil
	}
	if err != nil {
		return "", err
	}
	return string(out.GetUID()), nil
}

// EnsureNamespace creates the namespace name unless it exists, with the
// labels of NamespaceLabels; a namespace that exists is left as it is
// (its owner decides its labels). Callers use it when a create or apply in
// it answered NotFound rather than check before every write: the common
// case then costs one request.
func (c *ObjectClient) EnsureNamespace(ctx context.Context, name string) error {
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(name)
	if c.NamespaceLabels != nil {
		ns.SetLabels(c.NamespaceLabels(name))
	}
	_, err := c.dyn.Resource(corev1.SchemeGroupVersion.WithResource("namespaces")).
		Create(ctx, ns, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// Remove deletes the runnable's object of that kind and name, if it is
// there and still this runnable's and, when attempt is not 0, that
// attempt's (so that removing what an old attempt left never deletes a
// later attempt's object of the same name). The uid precondition makes
// sure a replacement created meanwhile is never deleted. It reports
// whether something was deleted: false with no error means the object is
// gone.
func (c *ObjectClient) Remove(ctx context.Context, gvk schema.GroupVersionKind, namespace, name, runnableUID string, attempt int) (bool, error) {
	ri, _, err := c.resource(gvk, namespace)
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
	labels := existing.GetLabels()
	if labels[v1alpha1.LabelRunnableUID] != runnableUID {
		return false, nil
	}
	if attempt != 0 && labels[v1alpha1.LabelAttempt] != strconv.Itoa(attempt) {
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

// MergePatch applies a JSON merge patch to the object of that kind and
// name. A patch that names metadata.uid applies only to that very object.
func (c *ObjectClient) MergePatch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, patch []byte) error {
	ri, _, err := c.resource(gvk, namespace)
	if err != nil {
		return err
	}
	_, err = ri.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	return err
}
