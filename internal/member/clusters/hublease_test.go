package clusters

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/internal/hub/seal/sealtest"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/member/clusters/clusterstest"
	"github.com/purser-io/purser/internal/sandbox"
)

// TestObserverRenewsHubLease: each pass renews the hub's Lease in the
// clusters that answer, after recording when that renewal can land at
// the latest; a cluster that does not answer gets neither the record nor
// a renewal, so its agent's silence keeps counting.
func TestObserverRenewsHubLease(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, storetest.Engines()[0].NewDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sealer, _ := sealtest.New(t)
	c := env.Dedicated(t, false)
	kube, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: HubLeaseNamespace}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	proxy, err := sandbox.NewProxy("127.0.0.1:0", c.APIServerAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	for name, server := range map[string]string{"direct": "", "cut": "https://" + proxy.Addr()} {
		kc, err := c.Kubeconfig(server)
		if err != nil {
			t.Fatal(err)
		}
		clusterstest.Register(t, st, sealer, store.Cluster{Name: name, Spec: []byte(`{}`)}, kc)
	}
	proxy.Cut()
	o := NewObserver(Config{Store: st, Sealer: sealer, DC: "dc-1", ProbeTimeout: time.Second})

	leases := func() (map[string]time.Time, time.Time) {
		t.Helper()
		var got map[string]time.Time
		var now time.Time
		if err := st.Read(ctx, func(tx *store.Tx) (err error) { got, now, err = tx.Clusters().HubLeases(ctx); return }); err != nil {
			t.Fatal(err)
		}
		return got, now
	}
	if err := o.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	got, now := leases()
	if _, ok := got["cut"]; ok {
		t.Errorf("a renewal was recorded for a cluster that does not answer: %v", got)
	}
	if ahead := got["direct"].Sub(now); ahead <= 0 || ahead > hubLeaseLandsWithin(time.Second) {
		t.Errorf("direct: renewal recorded to land by %s, %s after the database's clock; want within %s",
			got["direct"], ahead, hubLeaseLandsWithin(time.Second))
	}
	first, err := kube.CoordinationV1().Leases(HubLeaseNamespace).Get(ctx, HubLeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the hub's lease after a pass: %v", err)
	}
	if h := first.Spec.HolderIdentity; h == nil || *h != "purser-hub/dc-1" {
		t.Errorf("holder %v", h)
	}
	// The next pass changes the Lease's resourceVersion, which is what
	// the agent watches for.
	if err := o.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := kube.CoordinationV1().Leases(HubLeaseNamespace).Get(ctx, HubLeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if second.ResourceVersion == first.ResourceVersion {
		t.Errorf("a second pass left the Lease at resourceVersion %s", first.ResourceVersion)
	}
	// Once the cut cluster answers again, it is renewed too.
	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	if err := o.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ = leases(); got["cut"].IsZero() {
		t.Errorf("no renewal recorded for a cluster that answers again: %v", got)
	}
}
