package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// BenchmarkInformerMemory compares the heap held by a cache of 2,000
// ConfigMaps written the way kubectl apply writes them (last-applied
// annotation, managedFields) with and without Trim.
func BenchmarkInformerMemory(b *testing.B) {
	const n = 2000
	c := env.Clusters(b)[0]
	ctx := context.Background()
	ns := "agent-memory"
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	rc := c.RESTConfig()
	rc.QPS, rc.Burst = 500, 500
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	existing, err := kc.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if len(existing.Items) < n {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for i := range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i), Namespace: ns,
						Labels: map[string]string{"app": "bench", "team": "a"}},
					Data: map[string]string{"settings": strings.Repeat("k=v;", 50)}}
				applied, _ := json.Marshal(cm)
				cm.Annotations = map[string]string{lastApplied: string(applied)}
				_, _ = kc.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"})
			}()
		}
		wg.Wait()
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	for _, tc := range []struct {
		name      string
		transform cache.TransformFunc
	}{{"untrimmed", nil}, {"trimmed", Trim}} {
		b.Run(tc.name, func(b *testing.B) {
			var perObject float64
			for b.Loop() {
				before := heap()
				inf := dynamicinformer.NewFilteredDynamicInformer(dyn, gvr, ns, 0, cache.Indexers{}, nil).Informer()
				if tc.transform != nil {
					_ = inf.SetTransform(tc.transform)
				}
				runCtx, cancel := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() { defer close(done); inf.RunWithContext(runCtx) }()
				for !inf.HasSynced() {
					time.Sleep(10 * time.Millisecond)
				}
				// The list response and decoding buffers are garbage by now.
				after := heap()
				perObject = float64(after-before) / float64(len(inf.GetStore().ListKeys()))
				cancel()
				<-done
			}
			b.ReportMetric(perObject, "B/object")
		})
	}
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
