package triggers_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/control/triggers"
	"github.com/purser-io/purser/internal/domain/admission"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/domain/submission"
	"github.com/purser-io/purser/internal/hub/outbox"
	"github.com/purser-io/purser/internal/hub/seal/sealtest"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/member/agent"
	"github.com/purser-io/purser/internal/member/clusters/clusterstest"
	"github.com/purser-io/purser/internal/member/health"
	"github.com/purser-io/purser/internal/member/inventory"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// One sandbox cluster for the package, started by the first test that
// asks for it (the unit tests never do).
var env = sandboxtest.New(sandboxtest.Config{Clusters: 1})

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

const wait = 3 * time.Minute

var jobs = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}

// TestChainOnRealJobs runs the relay, the submitter, the agent, the
// ingester and the trigger loop on one database and a real
// kube-apiserver (whose Jobs' pods kwok completes): a Job runnable
// labelled app=etl is submitted and succeeds, and the trigger on its end
// creates its one runnable, whose Job then appears on the cluster.
func TestChainOnRealJobs(t *testing.T) {
	cluster := env.Clusters(t)[0]
	st := open(t, storetest.Engines()[0].NewDSN(t))
	sealer, _ := sealtest.New(t)
	kc, err := cluster.Kubeconfig("")
	if err != nil {
		t.Fatal(err)
	}
	clusterstest.Register(t, st, sealer, store.Cluster{Name: cluster.Name(), Labels: cluster.Labels()}, kc)
	dyn, err := dynamic.NewForConfig(cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	var suffix [3]byte
	_, _ = rand.Read(suffix[:])
	ns := "trig-" + hex.EncodeToString(suffix[:])
	t.Cleanup(func() {
		_ = dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	pol, err := policy.NewPolicy(policy.PolicyFile{Namespaces: map[string]policy.NamespacePolicy{
		ns: {Roles: map[policy.Role][]string{policy.RoleEditor: {"alice"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	polf := func() *policy.Policy { return pol }
	nats := streamtest.Start(t, "")
	streams := streamtest.Declared(t, nats.URL)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	relay := outbox.NewRelay(outbox.StoreSource(st), streams, outbox.Config{Interval: 200 * time.Millisecond})
	interp, err := health.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	ingester, err := inventory.New(inventory.Config{Store: st, Stream: streamtest.Connect(t, nats.URL), Logger: log,
		Health: interp, Fingerprint: sealer.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(agent.Config{Cluster: cluster.Name(), RESTConfig: cluster.RESTConfig(), Stream: streamtest.Connect(t, nats.URL),
		SnapshotInterval: 5 * time.Second, HeartbeatInterval: time.Second, DiscoveryInterval: 2 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	sub := submitter.New(submitter.Config{Store: st, Sealer: sealer, Stream: streams, Policy: pol, Logger: log})
	loop := triggers.NewLoop(triggers.Config{Store: st, Policy: polf, Notify: relay.Notify, Poll: 200 * time.Millisecond, Logger: log})
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{relay.Run, ingester.Run, ag.Run, sub.Run, loop.Run} {
		wg.Go(func() {
			if err := run(runCtx); err != nil && runCtx.Err() == nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	t.Cleanup(func() { stop(); wg.Wait() })

	tr := &v1alpha1.Trigger{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindTrigger},
		Metadata: v1alpha1.ObjectMeta{Name: "after-etl", Namespace: ns},
		Spec: v1alpha1.TriggerSpec{Source: v1alpha1.TriggerSource{RunnableEnded: &v1alpha1.RunnableEndedSource{
			Phases: []v1alpha1.Phase{v1alpha1.PhaseSucceeded}, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "etl"}},
		}}, Template: v1alpha1.RunnableSpec{Template: job()}},
	}
	tr.SetDefaults()
	if err := st.Tx(t.Context(), func(tx *store.Tx) error {
		_, _, _, err := triggers.Put(t.Context(), tx, tr, alice, time.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}

	// The ETL, submitted as the API does.
	etl := &v1alpha1.Runnable{TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindRunnable},
		Metadata: v1alpha1.ObjectMeta{Name: "etl", Namespace: ns, Labels: map[string]string{"app": "etl"}},
		Spec:     v1alpha1.RunnableSpec{Template: job()}}
	req := &submission.Request{Runnable: etl, Author: alice}
	gate := &submission.Gate{Policy: pol, Store: st, Pods: admission.DefaultChecker(), Now: time.Now}
	if err := gate.Prepare(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	var etlRec *store.Runnable
	if err := st.Tx(t.Context(), func(tx *store.Tx) error {
		out, err := submission.Create(t.Context(), tx, req)
		if out != nil {
			etlRec = out.Rec
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	relay.Notify()

	sandboxtest.Eventually(t, wait, "the ETL succeeds", func(ctx context.Context) error {
		r, err := runnable(st, ns, "etl")
		if err != nil {
			return err
		}
		if r.Phase != string(v1alpha1.PhaseSucceeded) {
			return fmt.Errorf("etl is %s", r.Phase)
		}
		return nil
	})
	run := v1alpha1.EventRunName("after-etl", v1alpha1.RunnableEndedEvent(etlRec.UID, 1))
	sandboxtest.Eventually(t, wait, "the Job of the trigger's run "+run+" appears", func(ctx context.Context) error {
		_, err := dyn.Resource(jobs).Namespace(ns).Get(ctx, run, metav1.GetOptions{})
		return err
	})
	r, err := runnable(st, ns, run)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := st.Read(t.Context(), func(tx *store.Tx) error {
		rs, err := triggers.Runs(t.Context(), tx, ns, "after-etl")
		n = len(rs)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n != 1 || r.Submitter != "alice" {
		t.Fatalf("%d runs of the trigger (want 1); the run's submitter %q (want the trigger's author)", n, r.Submitter)
	}
}

func runnable(st *store.Store, ns, name string) (*store.Runnable, error) {
	var rec *store.Runnable
	err := st.Read(context.Background(), func(tx *store.Tx) error {
		var err error
		rec, err = tx.Runnables().Get(context.Background(), ns, name)
		return err
	})
	return rec, err
}
