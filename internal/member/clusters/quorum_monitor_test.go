package clusters

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/seal/sealtest"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/member/probe"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// TestHealthMonitorQuorum: the monitor's own DC cannot reach a cluster
// (its kube-apiserver address refuses connections from here), while two
// other DCs record that they reach it. The cluster stays Ready: a
// minority of DCs, even the leader's, does not make a cluster down. Once
// the other DCs fall silent for longer than the observer expiry, the
// monitor's DC is the only observer left, and its view decides.
func TestHealthMonitorQuorum(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) { testHealthMonitorQuorum(t, eng.NewDSN(t)) })
	}
}

func testHealthMonitorQuorum(t *testing.T, dsn string) {
	ctx := t.Context()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sealer, _ := sealtest.New(t)
	// An address nothing listens on: from dc-1 the cluster is unreachable.
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["far"] = &clientcmdapi.Cluster{Server: "https://" + addr, InsecureSkipTLSVerify: true}
	kc.AuthInfos["far"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.Contexts["far"] = &clientcmdapi.Context{Cluster: "far", AuthInfo: "far"}
	kc.CurrentContext = "far"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := sealer.Seal(data, seal.KubeconfigBinding("far"))
	if err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	ready := fmt.Sprintf(`{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":%q,"reason":"ClusterReady","message":"kube-apiserver ready; no agent has reported yet"}]}`, since)
	row := &store.Cluster{Name: "far", Spec: []byte(`{"spec":{}}`), Kubeconfig: sealed, Labels: map[string]string{"dc": "dc-3"}, Status: []byte(ready)}
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.Clusters().Create(ctx, row) }); err != nil {
		t.Fatal(err)
	}

	// dc-2 and dc-3 reach it, and say so every 100 ms until stopped.
	others, stopOthers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		reconcile.Every(others, 100*time.Millisecond, func(ctx context.Context) {
			for _, dc := range []string{"dc-2", "dc-3"} {
				err := st.Tx(ctx, func(tx *store.Tx) error {
					return tx.Clusters().RecordViews(ctx, dc, []store.ViewRecord{{Cluster: "far", Outcome: "ok"}})
				})
				if err != nil && ctx.Err() == nil {
					t.Errorf("record %s's view: %v", dc, err)
				}
			}
		})
	})
	defer func() { stopOthers(); wg.Wait() }()

	m := &monitor{done: make(chan error, 1), probes: map[string][]probe.Outcome{}, wake: make(chan struct{}), react: map[string]func(){}}
	var mu sync.Mutex
	var judged []probe.Result
	observed := func(cluster string, o Observation, _ State) {
		mu.Lock()
		judged = append(judged, o.Probe)
		mu.Unlock()
		m.mu.Lock()
		defer m.mu.Unlock()
		m.passes++
		close(m.wake)
		m.wake = make(chan struct{})
	}
	hm := NewHealthMonitor(Config{
		Store: st, Sealer: sealer, Policy: fastPolicy, Interval: fastInterval, DC: "dc-1",
		ViewMaxAge: time.Second, ObserverExpiry: 2 * time.Second, Observed: observed,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	mctx, cancel := context.WithCancel(ctx)
	m.cancel = cancel
	go func() { m.done <- hm.Run(mctx) }()
	t.Cleanup(m.stop)

	// Many times the failure threshold of passes: still Ready, and each
	// judgement names the DC that disagrees.
	m.waitPasses(t, 5*fastPolicy.FailureThreshold)
	if c := ReadyCondition(readStatus(t, st, "far")); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("a cluster only dc-1 cannot reach: %+v", c)
	}
	mu.Lock()
	last := judged[len(judged)-1]
	mu.Unlock()
	if last.Outcome != probe.OK || last.Detail == "" {
		t.Errorf("judgement %+v: want OK, naming dc-1's failure", last)
	}
	var views []store.ClusterView
	if err := st.Read(ctx, func(tx *store.Tx) (err error) { views, _, err = tx.Clusters().ListViews(ctx); return }); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range views {
		got[v.Observer] = v.Outcome
	}
	if got["dc-1"] != "unreachable" || got["dc-2"] != "ok" || got["dc-3"] != "ok" {
		t.Errorf("views %v", got)
	}

	// The others fall silent: after the observer expiry dc-1 is the only
	// observer, and the cluster is judged by its view.
	stopOthers()
	wg.Wait()
	waitReady(t, st, "far", metav1.ConditionUnknown, ReasonAPIServerUnreachable)
}
