package syncer

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// BenchmarkRolloutDecisions measures the decision side of rollouts (no
// sandbox cluster: the workers' status rows are written as the workers
// write them once an apply succeeded): one deployable over 100 registered
// clusters in 5 waves, and 1,000 deployables at once over 10 clusters in
// 5 waves. It reports the decision passes and store writes per wave
// (minSuccessSeconds 0), and the time of one pass (ms/pass), which is
// what each wave takes beyond minSuccessSeconds besides the poll period
// and the applies.
//
//	go test ./internal/control/syncer -run '^$' -bench RolloutDecisions -benchtime 1x
func BenchmarkRolloutDecisions(b *testing.B) {
	for _, c := range []struct {
		name                  string
		deployables, clusters int
	}{{"1x100clusters", 1, 100}, {"1000x10clusters", 1000, 10}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				benchRollout(b, storetest.Engines()[0], c.deployables, c.clusters)
			}
		})
	}
}

func benchRollout(b *testing.B, eng storetest.Engine, nd, nc int) {
	ctx := context.Background()
	st, err := store.Open(ctx, eng.NewDSN(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	var waves []v1alpha1.Wave
	for w := range 5 {
		dc := fmt.Sprintf("dc-%d", w+1)
		waves = append(waves, v1alpha1.Wave{Name: dc, ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"dc": dc}}})
	}
	gen2, _ := json.Marshal(store.Document[v1alpha1.DeployableSpec]{Spec: v1alpha1.DeployableSpec{
		Template: configMapTemplate(map[string]any{"v": "2"}), Rollout: &v1alpha1.Rollout{Waves: waves}}})
	var recs []*store.Deployable
	err = st.Tx(ctx, func(tx *store.Tx) error {
		for i := range nc {
			if err := tx.Clusters().Create(ctx, &store.Cluster{Name: fmt.Sprintf("c%03d", i), Labels: map[string]string{"dc": fmt.Sprintf("dc-%d", i%5+1)}, Spec: []byte(`{}`)}); err != nil {
				return err
			}
		}
		for i := range nd {
			rec := &store.Deployable{Namespace: "bench", Name: fmt.Sprintf("cm-%04d", i), UID: randomHex(16), Generation: 2, Spec: gen2, SpecHash: randomHex(8)}
			if err := tx.Deployables().Create(ctx, rec); err != nil {
				return err
			}
			recs = append(recs, rec)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	s := New(Config{Store: st})
	if err := s.poll(ctx, true); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var passes int
	var spent time.Duration
	writes0 := s.statusWrites.Load()
	for done := false; !done; {
		start := time.Now()
		if err := s.decideRollouts(ctx); err != nil {
			b.Fatal(err)
		}
		spent += time.Since(start)
		passes++
		if err := s.poll(ctx, false); err != nil {
			b.Fatal(err)
		}
		// The workers: every cluster given generation 2 reports it synced.
		done = true
		err := st.Tx(ctx, func(tx *store.Tx) error {
			for _, rec := range recs {
				rs := s.rollouts[rec.UID]
				if rs == nil || rs.status == nil || rs.status.State != v1alpha1.RolloutComplete {
					done = false
				}
				if rs == nil || rs.status == nil {
					continue
				}
				now := time.Now()
				for _, c := range rs.status.Clusters {
					if c.Generation == 2 && c.GenerationApplied != 2 {
						if err := tx.Deployables().PutStatus(ctx, &store.DeployableClusterStatus{DeployableUID: rec.UID, Cluster: c.Cluster,
							State: "Synced", SyncedGeneration: 2, StateGeneration: 2, LastSyncedAt: &now}); err != nil {
							return err
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if passes > 100 {
			b.Fatal("the rollout did not complete in 100 passes")
		}
	}
	b.ReportMetric(float64(passes)/5, "passes/wave")
	b.ReportMetric(float64(s.statusWrites.Load()-writes0)/float64(nd)/5, "writes/deployable/wave")
	b.ReportMetric(float64(spent.Milliseconds())/float64(passes), "ms/pass")
}
