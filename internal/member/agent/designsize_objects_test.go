package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/purser-io/purser/internal/platform/reconcile"
)

// The objects of the design-size benchmark: what a busy member cluster
// holds, written the way most of it is written (kubectl apply: the
// last-applied annotation and client-side managedFields), in several
// namespaces. ConfigMaps are most of it; Secrets and Jobs are tracked kinds
// with their own shapes (Trim hashes a Secret's data; a Job carries a pod
// template the API server fills with defaults). The Jobs are suspended, so
// that the cluster's job controller creates no pods: the benchmark measures
// the agent, not the scheduler.

// designMix is how many objects of each kind every namespace holds.
type designMix struct {
	Namespaces, ConfigMaps, Secrets, Jobs int
}

func (m designMix) total() int { return m.Namespaces * (m.ConfigMaps + m.Secrets + m.Jobs) }

// designSize is purser's design size for one cluster: 100,000 objects.
var designSize = designMix{Namespaces: 20, ConfigMaps: 4500, Secrets: 300, Jobs: 200}

func designNamespace(i int) string { return fmt.Sprintf("scale-%02d", i) }

// designLabels are the labels of object i: the recommended app labels and
// a team, a few hundred distinct values in all, as a shared cluster has.
func designLabels(i int) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      fmt.Sprintf("svc-%03d", i%150),
		"app.kubernetes.io/part-of":   "shop",
		"app.kubernetes.io/component": []string{"api", "worker", "cache", "web"}[i%4],
		"team":                        fmt.Sprintf("team-%02d", i%12),
		"env":                         "prod",
	}
}

// designConfigMap is ConfigMap i of namespace ns: two keys, a properties
// file of 6 to 36 lines (about 0.3 to 1.9 kB) and a small logging file.
func designConfigMap(ns string, i int) *corev1.ConfigMap {
	var props strings.Builder
	for l := range 6 + (i%7)*5 {
		fmt.Fprintf(&props, "service.dep%02d.endpoint=http://svc-%03d.%s.svc:8080/v%d\n", l, (i+l)%150, ns, l%3+1)
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("config-%05d", i), Namespace: ns, Labels: designLabels(i)},
		Data: map[string]string{
			"application.properties": props.String(),
			"logging.yaml":           fmt.Sprintf("level: %s\nformat: json\nsampling: %d\n", []string{"info", "debug", "warn"}[i%3], i%100),
		},
	}
}

// designSecret is Secret i: credentials of a service.
func designSecret(ns string, i int) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("credentials-%05d", i), Namespace: ns, Labels: designLabels(i)},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			"username": fmt.Appendf(nil, "svc-%03d", i%150),
			"password": fmt.Appendf(nil, "%032x", uint64(i)*2654435761),
		},
	}
}

// designJob is Job i: a suspended batch job with one container.
func designJob(ns string, i int) *batchv1.Job {
	suspend := true
	backoff := int32(2)
	ttl := int32(86400)
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("report-%05d", i), Namespace: ns, Labels: designLabels(i)},
		Spec: batchv1.JobSpec{
			Suspend: &suspend, BackoffLimit: &backoff, TTLSecondsAfterFinished: &ttl,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: designLabels(i)},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:    "report",
						Image:   fmt.Sprintf("registry.example.com/batch/report:1.%d", i%20),
						Command: []string{"/bin/report", fmt.Sprintf("--shard=%d", i%64), "--output=s3://reports/daily"},
						Env: []corev1.EnvVar{
							{Name: "REPORT_DAY", Value: "2026-12-06"},
							{Name: "REPORT_TEAM", Value: fmt.Sprintf("team-%02d", i%12)},
						},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: apiresource.MustParse("100m"), corev1.ResourceMemory: apiresource.MustParse("128Mi"),
						}},
					}},
				},
			},
		},
	}
}

// withLastApplied adds the annotation kubectl apply writes: the object as
// applied, encoded once more.
func withLastApplied(obj metav1.Object, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	obj.SetAnnotations(map[string]string{lastApplied: string(b)})
	return nil
}

// populate creates the mix in the cluster behind rc and returns how many
// objects it created (those already there count too, so that a rerun on
// the same cluster completes the set). Creation is concurrent, through a
// client without client-side rate limit, in protobuf: the cluster's
// kube-apiserver and etcd set the pace.
func populate(ctx context.Context, rc *rest.Config, mix designMix) (int, error) {
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = 5000, 5000
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return 0, err
	}
	for n := range mix.Namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: designNamespace(n)}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("namespace %s: %w", ns.Name, err)
		}
	}
	// kubectl's field manager for a client-side apply, so that the
	// managedFields are those of kubectl apply.
	opts := metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}
	create := func(ctx context.Context, ns string, i int) error {
		switch {
		case i < mix.ConfigMaps:
			cm := designConfigMap(ns, i)
			if err := withLastApplied(cm, cm); err != nil {
				return err
			}
			_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, opts)
			return err
		case i < mix.ConfigMaps+mix.Secrets:
			s := designSecret(ns, i)
			if err := withLastApplied(s, s); err != nil {
				return err
			}
			_, err := cs.CoreV1().Secrets(ns).Create(ctx, s, opts)
			return err
		default:
			j := designJob(ns, i)
			if err := withLastApplied(j, j); err != nil {
				return err
			}
			_, err := cs.BatchV1().Jobs(ns).Create(ctx, j, opts)
			return err
		}
	}
	type item struct {
		ns string
		i  int
	}
	work := make(chan item)
	var created atomic.Int64
	var firstErr error
	var errOnce sync.Once
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	// Enough requests in flight to keep both cores of the kube-apiserver
	// and etcd busy, well under its default 200 mutating requests.
	for range 48 {
		wg.Go(func() {
			for it := range work {
				err := reconcile.Retry(ctx, reconcile.Backoff(50*time.Millisecond, 2*time.Second), func(ctx context.Context, _ int) error {
					err := create(ctx, it.ns, it.i)
					switch {
					case err == nil, apierrors.IsAlreadyExists(err):
						return nil
					case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsForbidden(err):
						return reconcile.Terminal(err)
					}
					return err // overloaded or timed out: tried again
				})
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("create object %d of %s: %w", it.i, it.ns, err); cancel() })
					continue
				}
				created.Add(1)
			}
		})
	}
	per := mix.ConfigMaps + mix.Secrets + mix.Jobs
feed:
	// Round robin over the namespaces, so that each kind is created
	// throughout the run rather than in one burst.
	for i := range per {
		for n := range mix.Namespaces {
			select {
			case work <- item{ns: designNamespace(n), i: i}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return int(created.Load()), firstErr
	}
	return int(created.Load()), ctx.Err()
}
