package kuberetry_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/purser-io/purser/internal/member/kuberetry"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

var env = sandboxtest.New(sandboxtest.Config{Clusters: 0})

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("list: %w", syscall.ECONNREFUSED), true},
		{apierrors.NewServiceUnavailable("starting"), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewInternalError(errors.New("etcd not ready")), true},
		{apierrors.NewNotFound(gr, "x"), false},
		{apierrors.NewForbidden(gr, "x", errors.New("no")), false},
		{apierrors.NewResourceExpired("too old"), false},
		{context.Canceled, false},
		{fmt.Errorf("get: %w", context.DeadlineExceeded), false},
	} {
		if got := kuberetry.Transient(c.err); got != c.want {
			t.Errorf("Transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// An informer over the patient client sees the first object created after
// its kube-apiserver was down for a while; calls that cannot succeed still
// fail at once.
func TestInformerAfterOutage(t *testing.T) {
	c := env.Dedicated(t, false)
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	const ns = "kuberetry"
	if err := c.EnsureNamespace(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	patient := kuberetry.Dynamic(dyn)
	start := time.Now()
	_, err = patient.Resource(schema.GroupVersionResource{Version: "v1", Resource: "nosuchthings"}).Namespace(ns).List(t.Context(), metav1.ListOptions{})
	if !apierrors.IsNotFound(err) || time.Since(start) > 5*time.Second {
		t.Errorf("a list of an unknown resource: %v after %s, want NotFound at once", err, time.Since(start))
	}

	seen := inform(t, patient, ns)
	outage(t, c, 12*time.Second)
	created := createConfigMap(t, c, ns, "after-outage")
	sandboxtest.Eventually(t, 2*time.Minute, "the informer sees the ConfigMap created after the outage", func(context.Context) error {
		if _, ok := seen.Load("after-outage"); !ok {
			return errors.New("not yet")
		}
		return nil
	})
	t.Logf("seen %s after its creation", time.Since(created).Round(10*time.Millisecond))
}

// BenchmarkRecoveryAfterOutage: after a 20 s outage of the kube-apiserver,
// how long an informer over the plain client and one over the patient
// client take to see an object created as soon as it is back.
//
//	go test ./internal/member/kuberetry -run '^$' -bench RecoveryAfterOutage -benchtime 1x
func BenchmarkRecoveryAfterOutage(b *testing.B) {
	c := env.Dedicated(b, false)
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	const ns = "kuberetry-bench"
	if err := c.EnsureNamespace(b.Context(), ns); err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		plain, patient := inform(b, dyn, ns), inform(b, kuberetry.Dynamic(dyn), ns)
		outage(b, c, 20*time.Second)
		name := fmt.Sprintf("after-outage-%d", i)
		created := createConfigMap(b, c, ns, name)
		for what, seen := range map[string]*sync.Map{"s/plain": plain, "s/patient": patient} {
			for {
				if at, ok := seen.Load(name); ok {
					b.ReportMetric(at.(time.Time).Sub(created).Seconds(), what)
					break
				}
				if time.Since(created) > 3*time.Minute {
					b.Fatalf("%s: never seen", what)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// inform runs a ConfigMap informer over d in ns until the test ends and
// returns the names it has seen added, with the time it saw each.
func inform(t testing.TB, d dynamic.Interface, ns string) *sync.Map {
	t.Helper()
	var seen sync.Map
	inf := dynamicinformer.NewFilteredDynamicInformer(d, configMaps, ns, 0, cache.Indexers{}, nil).Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			seen.Store(u.GetName(), time.Now())
		}
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { inf.RunWithContext(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
		t.Fatal("the informer never synced")
	}
	return &seen
}

// outage stops the kube-apiserver for d and starts it again.
func outage(t testing.TB, c *sandbox.Cluster, d time.Duration) {
	t.Helper()
	c.StopAPIServer()
	time.Sleep(d)
	if err := c.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func createConfigMap(t testing.TB, c *sandbox.Cluster, ns, name string) time.Time {
	t.Helper()
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}
