package rollout

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
)

// BenchmarkDecide: one decision of a rollout over 100 clusters in 5 waves,
// the third wave in progress, every cluster reporting.
func BenchmarkDecide(b *testing.B) {
	var waves []v1alpha1.Wave
	for w := range 5 {
		waves = append(waves, v1alpha1.Wave{Name: fmt.Sprintf("dc-%d", w+1),
			ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"dc": fmt.Sprintf("dc-%d", w+1)}}})
	}
	in := Input{Spec: v1alpha1.Rollout{Waves: waves, MinSuccessSeconds: 60}, Generation: 2, Previous: 1,
		Reports: map[string]Report{}, Now: t0, Control: Control{Generation: 2}}
	for i := range 100 {
		name := fmt.Sprintf("c%03d", i)
		in.Clusters = append(in.Clusters, Cluster{Name: name, Labels: map[string]string{"dc": fmt.Sprintf("dc-%d", i%5+1)}})
		in.Reports[name] = synced(2, t0.Add(-time.Minute), t0)
	}
	st := Decide(in).Status
	st.WaveIndex = 2
	in.Prior = &st
	b.ReportAllocs()
	for b.Loop() {
		Decide(in)
	}
}
