// Package kuberetry makes informers find a kube-apiserver that comes back
// within a second or two, instead of after client-go's reflector backoff.
//
// A reflector whose list or watch fails waits before it tries again, and
// the wait doubles with every failure up to 30 s, with as much again of
// jitter; the informer options do not let a caller change it. After a
// kube-apiserver outage of half a minute an informer can so stay blind for
// up to a minute more. Dynamic wraps a dynamic client so that a list or a
// watch that fails because the server cannot be reached, or is not ready
// (429, 5xx), is tried again every second, within the call, for up to
// Patience: the reflector sees the call succeed as soon as the server
// answers, and its backoff never grows. Every other error comes back at
// once, as before.
package kuberetry

import (
	"context"
	"errors"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/purser-io/purser/internal/platform/reconcile"
)

// Patience is how long one list or watch keeps trying before it returns
// its error to the reflector, which then backs off as usual.
const Patience = time.Minute

// interval is the wait between two tries, lengthened by up to a fifth.
const interval = time.Second

// Dynamic returns d with patient lists and watches; pass it to informers.
func Dynamic(d dynamic.Interface) dynamic.Interface { return client{d} }

type client struct{ dynamic.Interface }

func (c client) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return resource{c.Interface.Resource(gvr)}
}

type resource struct {
	dynamic.NamespaceableResourceInterface
}

func (r resource) Namespace(ns string) dynamic.ResourceInterface {
	return namespaced{r.NamespaceableResourceInterface.Namespace(ns)}
}

func (r resource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return retry(ctx, func() (*unstructured.UnstructuredList, error) {
		return r.NamespaceableResourceInterface.List(ctx, opts)
	})
}

func (r resource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return retry(ctx, func() (watch.Interface, error) { return r.NamespaceableResourceInterface.Watch(ctx, opts) })
}

type namespaced struct{ dynamic.ResourceInterface }

func (r namespaced) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return retry(ctx, func() (*unstructured.UnstructuredList, error) { return r.ResourceInterface.List(ctx, opts) })
}

func (r namespaced) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return retry(ctx, func() (watch.Interface, error) { return r.ResourceInterface.Watch(ctx, opts) })
}

// retry calls fn until it succeeds, fails for a reason other than an
// unreachable or unready server, Patience has passed, or ctx is done.
func retry[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	deadline := time.Now().Add(Patience)
	var v T
	var err error
	// The deadline is not ctx's: ctx bounds the watch that succeeds, too.
	// The last answer goes back to the reflector as it came, unwrapped.
	_ = reconcile.Retry(ctx, reconcile.Backoff(interval, interval), func(context.Context, int) error {
		if v, err = fn(); err != nil && (!Transient(err) || time.Now().After(deadline)) {
			return reconcile.Terminal(err)
		}
		return err
	})
	return v, err
}

// Transient reports whether err says that the server could not be reached
// or is not ready yet: what ends by itself when the server is back.
func Transient(err error) bool {
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err),
		errors.As(err, &netErr):
		return true
	case apierrors.IsTooManyRequests(err), apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err),
		apierrors.IsServerTimeout(err), apierrors.IsTimeout(err):
		return true
	}
	return false
}
