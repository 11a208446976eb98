package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1ac "k8s.io/client-go/applyconfigurations/coordination/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/member/agent"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

const fieldManager = "purser-deploy-test"

// warnings collects the kube-apiserver's warnings, among them Pod Security
// admission's "would violate PodSecurity" for a pod template that breaks
// the namespace's level.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// applier applies objects server-side to the sandbox cluster.
type applier struct {
	dyn    dynamic.Interface
	mapper meta.ResettableRESTMapper
	warn   *warnings
}

func newApplier(t *testing.T, c *sandbox.Cluster) *applier {
	t.Helper()
	cfg := c.RESTConfig()
	w := &warnings{}
	cfg.WarningHandlerWithContext = w
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)), warn: w}
}

// apply applies o, for real or with server-side dry-run.
func (a *applier) apply(ctx context.Context, o *unstructured.Unstructured, dryRun bool) error {
	gvk := o.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s: %w", gvk, err)
	}
	var r dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		r = a.dyn.Resource(mapping.Resource).Namespace(o.GetNamespace())
	}
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = r.Apply(ctx, o.GetName(), o, opts)
	return err
}

// TestServerSideDryRun applies every object of every kustomization with
// server-side apply and dryRun=All: the kube-apiserver validates each one
// against its schema and runs admission (Pod Security at the namespace's
// "restricted" level included) without storing anything. The namespace is
// created for real first, since a dry-run in a namespace that does not
// exist fails.
func TestServerSideDryRun(t *testing.T) {
	c := env.Clusters(t)[0]
	a := newApplier(t, c)
	ctx := t.Context()
	for _, dir := range append(slices.Clone(bases), examples...) {
		t.Run(dir, func(t *testing.T) {
			m := render(t, dir)
			objs := slices.Clone(m.objs)
			// Namespaces first, for real.
			slices.SortStableFunc(objs, func(x, y *unstructured.Unstructured) int {
				return boolInt(y.GetKind() == "Namespace") - boolInt(x.GetKind() == "Namespace")
			})
			for _, o := range objs {
				dry := o.GetKind() != "Namespace"
				if err := a.apply(ctx, o, dry); err != nil {
					t.Errorf("apply %s %s/%s (dry-run %v): %v", o.GetKind(), o.GetNamespace(), o.GetName(), dry, err)
				}
				for _, w := range a.warn.take() {
					t.Errorf("%s %s: the kube-apiserver warns: %s", o.GetKind(), o.GetName(), w)
				}
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// serviceAccountConfig is a client configuration that authenticates as a
// service account, with a token from the TokenRequest API: the identity
// the pods of the manifests get.
func serviceAccountConfig(t *testing.T, c *sandbox.Cluster, namespace, name string) *rest.Config {
	t.Helper()
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := kc.CoreV1().ServiceAccounts(namespace).CreateToken(t.Context(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", namespace, name, err)
	}
	cfg := c.RESTConfig()
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// applyRBAC applies, for real, the Namespace, ServiceAccounts, Secrets
// and RBAC objects of m (not the workloads, which have no image here).
func applyRBAC(ctx context.Context, t *testing.T, a *applier, m manifests) {
	t.Helper()
	order := []string{"Namespace", "ServiceAccount", "Secret", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding"}
	for _, kind := range order {
		for _, o := range m.objs {
			if o.GetKind() != kind {
				continue
			}
			if err := a.apply(ctx, o, false); err != nil {
				t.Fatalf("apply %s %s: %v", kind, o.GetName(), err)
			}
		}
	}
}

// can asks the kube-apiserver whether the service account may do verb on
// the resource.
func can(t *testing.T, kc kubernetes.Interface, sa string, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	ns, name, _ := strings.Cut(sa, "/")
	sar, err := kc.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + ns + ":" + name,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &attrs,
		}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

// newNamespace creates a namespace of its own for the test, removed when
// it ends.
func newNamespace(t *testing.T, kc kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := kc.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	return ns.Name
}

// syncBuffer is a log sink that the agent's goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runAgent runs the real agent as the service account purser-agent, with
// leader election as the manifests configure it.
func runAgent(t *testing.T, c *sandbox.Cluster, cluster, identity string, natsURL string) (logs *syncBuffer) {
	t.Helper()
	logs = &syncBuffer{}
	a, err := agent.New(agent.Config{
		Cluster:    cluster,
		RESTConfig: serviceAccountConfig(t, c, "purser-system", "purser-agent"),
		Stream:     streamtest.Connect(t, natsURL),
		// Short periods, so that the test sees snapshots, discovery and
		// fencing within seconds; the heartbeat stays a third of the lease.
		HeartbeatInterval: 500 * time.Millisecond,
		LeaseDuration:     5 * time.Second,
		SnapshotInterval:  2 * time.Second,
		DiscoveryInterval: time.Second,
		LeaderElection: agent.LeaderElection{Enabled: true, Namespace: "purser-system", Name: "purser-agent",
			Identity: identity},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.Run(ctx); err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("agent's logs:\n%s", logs)
		}
	})
	return logs
}

func heartbeatOf(ctx context.Context, sc *stream.Client, cluster string) (*stream.Heartbeat, error) {
	kv, err := sc.JetStream().KeyValue(ctx, stream.HeartbeatsBucket)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, cluster)
	if err != nil {
		return nil, err
	}
	var hb stream.Heartbeat
	if err := json.Unmarshal(e.Value(), &hb); err != nil {
		return nil, err
	}
	return &hb, nil
}

// installCRD serves a kind whose operator cannot run here, with a schema
// that keeps every field.
func installCRD(t *testing.T, dyn dynamic.Interface, group, version, kind, plural string) {
	t.Helper()
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + group},
		"spec": map[string]any{"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": plural, "singular": strings.ToLower(kind), "kind": kind, "listKind": kind + "List"},
			"versions": []any{map[string]any{"name": version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object",
					"x-kubernetes-preserve-unknown-fields": true}}}}},
	}}
	_, err := crds.Apply(t.Context(), crd.GetName(), crd, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	if err != nil {
		t.Fatal(err)
	}
}

var flinkGVR = schema.GroupVersionResource{Group: "flink.apache.org", Version: "v1beta1", Resource: "flinkdeployments"}

// TestAgentPermissionsSuffice runs the real agent under the service
// account and RBAC of deploy/agent, and sees it do all of its work: elect
// itself through the Lease, track the default kinds and a labelled object
// of another kind, heartbeat, and, cut off from NATS, fence: suspend a Job
// and a FlinkDeployment, delete a Deployment. Its logs must show no
// forbidden call. The kube-apiserver then confirms what it may not do.
func TestAgentPermissionsSuffice(t *testing.T) {
	c := env.Clusters(t)[0]
	a := newApplier(t, c)
	applyRBAC(t.Context(), t, a, render(t, "examples/agent"))
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	installCRD(t, a.dyn, "flink.apache.org", "v1beta1", "FlinkDeployment", "flinkdeployments")

	ns := newNamespace(t, kc, "deploy-agent-")
	ctx := t.Context()
	atMostOne := map[string]string{v1alpha1.LabelRunnableUID: "r-1", v1alpha1.LabelConsistency: v1alpha1.ConsistencyAtMostOne}
	podSpec := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "fenced"}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
	if _, err := kc.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "fenced", Labels: atMostOne},
		Spec: batchv1.JobSpec{Template: podSpec}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	always := podSpec
	always.Spec.RestartPolicy = corev1.RestartPolicyAlways
	if _, err := kc.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "fenced", Labels: atMostOne},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: podSpec.Labels}, Template: always}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Not a tracked kind: tracked for purser's label only, through the
	// wildcard list/watch.
	if _, err := kc.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "labelled",
		Labels: map[string]string{v1alpha1.LabelRunnableUID: "r-2"}},
		Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", Suspend: new(true),
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podSpec}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	flinks := a.dyn.Resource(flinkGVR).Namespace(ns)
	sandboxtest.Eventually(t, 2*time.Minute, "a FlinkDeployment, once its CRD is served", func(ctx context.Context) error {
		_, err := flinks.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
			"metadata": map[string]any{"name": "fenced", "labels": map[string]any{
				v1alpha1.LabelRunnableUID: "r-3", v1alpha1.LabelConsistency: v1alpha1.ConsistencyAtMostOne}},
			"spec": map[string]any{"job": map[string]any{"jarURI": "local:///job.jar", "state": "running"}}}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})

	srv := streamtest.Start(t, "")
	sc := streamtest.Declared(t, srv.URL)
	const cluster, identity = "deploy-test", "deploy-test-agent"
	logs := runAgent(t, c, cluster, identity, srv.URL)

	sandboxtest.Eventually(t, 2*time.Minute, "the agent leads through its Lease", func(ctx context.Context) error {
		l, err := kc.CoordinationV1().Leases("purser-system").Get(ctx, "purser-agent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h := l.Spec.HolderIdentity; h == nil || *h != identity {
			return fmt.Errorf("holder %v", h)
		}
		return nil
	})
	tracked := []string{"batch/v1/Job", "apps/v1/Deployment", "flink.apache.org/v1beta1/FlinkDeployment", "v1/Node", "batch/v1/CronJob"}
	sandboxtest.Eventually(t, 2*time.Minute, "a heartbeat counting the objects of every kind", func(ctx context.Context) error {
		hb, err := heartbeatOf(ctx, sc, cluster)
		if err != nil {
			return err
		}
		for _, k := range tracked {
			if hb.Objects[k] == 0 {
				return fmt.Errorf("no %s in %v", k, hb.Objects)
			}
		}
		if hb.LastSnapshot.IsZero() {
			return fmt.Errorf("no snapshot yet")
		}
		// The free capacity needs its watch of Nodes and Pods.
		if hb.Capacity == nil || hb.Capacity.Nodes == 0 {
			return fmt.Errorf("no capacity report: %+v", hb.Capacity)
		}
		return nil
	})

	srv.Stop()
	sandboxtest.Eventually(t, 2*time.Minute, "the Job suspended by fencing", func(ctx context.Context) error {
		j, err := kc.BatchV1().Jobs(ns).Get(ctx, "fenced", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if j.Spec.Suspend == nil || !*j.Spec.Suspend {
			return fmt.Errorf("spec.suspend %v", j.Spec.Suspend)
		}
		return nil
	})
	sandboxtest.Eventually(t, 2*time.Minute, "the FlinkDeployment suspended by fencing", func(ctx context.Context) error {
		f, err := flinks.Get(ctx, "fenced", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s, _, _ := unstructured.NestedString(f.Object, "spec", "job", "state"); s != "suspended" {
			return fmt.Errorf("spec.job.state %q", s)
		}
		return nil
	})
	sandboxtest.Eventually(t, 2*time.Minute, "the Deployment deleted by fencing", func(ctx context.Context) error {
		d, err := kc.AppsV1().Deployments(ns).Get(ctx, "fenced", metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && d.DeletionTimestamp != nil) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
	if l := strings.ToLower(logs.String()); strings.Contains(l, "forbidden") {
		t.Errorf("the agent was refused something:\n%s", logs)
	}

	// What the agent may not do: write anything but its Lease and what
	// fencing needs, or read a Secret by name.
	const sa = "purser-system/purser-agent"
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Verb: "create", Group: "batch", Resource: "jobs", Namespace: ns},
		{Verb: "update", Group: "batch", Resource: "jobs", Namespace: ns},
		{Verb: "delete", Group: "batch", Resource: "jobs", Namespace: ns},
		{Verb: "get", Resource: "secrets", Namespace: ns, Name: "x"},
		{Verb: "patch", Resource: "configmaps", Namespace: ns},
		{Verb: "delete", Resource: "nodes"},
		{Verb: "create", Resource: "namespaces"},
		{Verb: "delete", Group: "batch", Resource: "cronjobs", Namespace: ns},
		{Verb: "create", Resource: "pods", Namespace: ns},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "purser-system", Name: "other"},
		{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system"},
	} {
		if can(t, kc, sa, attrs) {
			t.Errorf("the agent may %s %s/%s %s in %q", attrs.Verb, attrs.Group, attrs.Resource, attrs.Name, attrs.Namespace)
		}
	}
}

// TestRestrictedAgentStillWorks: with the agent's wildcard narrowed to a
// list of kinds, the kinds it tracks in full and the listed ones are still
// tracked and snapshotted; the other kinds' watches are refused, which the
// logs show and nothing else suffers from.
func TestRestrictedAgentStillWorks(t *testing.T) {
	c := env.Clusters(t)[0]
	a := newApplier(t, c)
	m := render(t, "examples/agent-restricted")
	applyRBAC(t.Context(), t, a, m)
	t.Cleanup(func() { applyRBAC(context.Background(), t, a, render(t, "examples/agent")) })
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t, kc, "deploy-agent-restricted-")
	ctx := t.Context()
	labels := map[string]string{v1alpha1.LabelRunnableUID: "r-4"}
	if _, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tracked", Labels: labels}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A kind outside the list: the agent cannot see it.
	if _, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "unseen", Labels: labels}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	srv := streamtest.Start(t, "")
	sc := streamtest.Declared(t, srv.URL)
	const cluster = "deploy-test-restricted"
	started := time.Now()
	logs := runAgent(t, c, cluster, "deploy-test-restricted-agent", srv.URL)
	sandboxtest.Eventually(t, 2*time.Minute, "a snapshot with the tracked kinds", func(ctx context.Context) error {
		hb, err := heartbeatOf(ctx, sc, cluster)
		if err != nil {
			return err
		}
		for _, k := range []string{"v1/ConfigMap", "v1/Node", "batch/v1/Job"} {
			if _, ok := hb.Objects[k]; !ok {
				return fmt.Errorf("no %s in %v", k, hb.Objects)
			}
		}
		if hb.LastSnapshot.IsZero() {
			return fmt.Errorf("no snapshot yet")
		}
		return nil
	})
	hb, err := heartbeatOf(ctx, sc, cluster)
	if err != nil {
		t.Fatal(err)
	}
	if n := hb.Objects["v1/ServiceAccount"]; n != 0 {
		t.Errorf("the restricted agent tracks %d ServiceAccounts", n)
	}
	// The agent asked before watching: it says once what it leaves out
	// (when it starts the watches of purser's objects of the other kinds,
	// which may come after its first snapshot), and no refused list or
	// watch is retried.
	sandboxtest.Eventually(t, time.Minute, "the restricted agent saying that it leaves ServiceAccounts out", func(context.Context) error {
		if out := logs.String(); !strings.Contains(out, "not allowed to list and watch") || !strings.Contains(out, "serviceaccounts") {
			return fmt.Errorf("not said yet:\n%s", out)
		}
		return nil
	})
	out := logs.String()
	if n := strings.Count(strings.ToLower(out), "forbidden"); n > 0 {
		t.Errorf("the restricted agent logged %d refusals in %s:\n%s", n, time.Since(started).Round(time.Second), out)
	}
	if can(t, kc, "purser-system/purser-agent", authorizationv1.ResourceAttributes{Verb: "list", Resource: "serviceaccounts"}) {
		t.Errorf("the restricted agent may list ServiceAccounts")
	}
}

// TestHubPermissionsSuffice makes the calls of the submitter, the syncer
// and the controller in a member cluster with the token of
// deploy/member-access's service account.
func TestHubPermissionsSuffice(t *testing.T) {
	c := env.Clusters(t)[0]
	a := newApplier(t, c)
	applyRBAC(t.Context(), t, a, render(t, "member-access"))
	admin, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	cfg := serviceAccountConfig(t, c, "purser-system", "purser-hub")
	hub, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	// controller: the probe.
	if body, err := hub.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		t.Errorf("GET /readyz: %v (%s)", err, body)
	}
	// controller: the hub's Lease, renewed by server-side apply (created
	// the first time), and read by the agent.
	for range 2 {
		l := coordinationv1ac.Lease(clusters.HubLeaseName, clusters.HubLeaseNamespace).WithSpec(
			coordinationv1ac.LeaseSpec().WithHolderIdentity("purser-hub/test").WithRenewTime(metav1.NewMicroTime(time.Now())))
		if _, err := hub.CoordinationV1().Leases(clusters.HubLeaseNamespace).Apply(ctx, l,
			metav1.ApplyOptions{FieldManager: "purser-hub", Force: true}); err != nil {
			t.Errorf("renew the hub's Lease: %v", err)
		}
	}
	// syncer: the cluster's identity.
	if _, err := hub.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
		t.Errorf("get namespace kube-system: %v", err)
	}
	// submitter and syncer: a missing namespace is created.
	created, err := hub.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "deploy-hub-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	ns := created.Name
	t.Cleanup(func() { _ = admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })

	// submitter: create, read back, cancel; controller: remove.
	jobs := dyn.Resource(schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}).Namespace(ns)
	job := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": "placed", "labels": map[string]any{v1alpha1.LabelRunnableUID: "r-5"}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never",
			"containers": []any{map[string]any{"name": "main", "image": "busybox"}}}}}}}
	placed, err := jobs.Create(ctx, job, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		t.Fatalf("create Job: %v", err)
	}
	if _, err := jobs.Get(ctx, "placed", metav1.GetOptions{}); err != nil {
		t.Errorf("get Job: %v", err)
	}
	uid := placed.GetUID()
	// controller: resume a fenced Job, by a merge patch naming its uid.
	resume := fmt.Sprintf(`{"metadata":{"uid":%q,"annotations":{"purser.io/fenced":null}},"spec":{"suspend":false}}`, uid)
	if _, err := jobs.Patch(ctx, "placed", types.MergePatchType, []byte(resume), metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		t.Errorf("resume Job: %v", err)
	}
	if err := jobs.Delete(ctx, "placed", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		t.Errorf("delete Job: %v", err)
	}

	// syncer: apply (creating), watch its label, read, remove.
	cms := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns)
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "synced", "labels": map[string]any{"purser.io/deployable": "d-1"}},
		"data":     map[string]any{"k": "v"}}}
	if _, err := cms.Apply(ctx, "synced", cm, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		t.Errorf("apply ConfigMap: %v", err)
	}
	all := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	if _, err := all.List(ctx, metav1.ListOptions{LabelSelector: "purser.io/deployable"}); err != nil {
		t.Errorf("list ConfigMaps: %v", err)
	}
	w, err := all.Watch(ctx, metav1.ListOptions{LabelSelector: "purser.io/deployable"})
	if err != nil {
		t.Errorf("watch ConfigMaps: %v", err)
	} else {
		w.Stop()
	}
	if _, err := cms.Get(ctx, "synced", metav1.GetOptions{}); err != nil {
		t.Errorf("get ConfigMap: %v", err)
	}
	if err := cms.Delete(ctx, "synced", metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete ConfigMap: %v", err)
	}

	const sa = "purser-system/purser-hub"
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Verb: "delete", Resource: "namespaces", Name: ns},
		{Verb: "get", Resource: "namespaces", Name: "default"},
		{Verb: "list", Resource: "pods"},
		{Verb: "update", Group: "batch", Resource: "jobs", Namespace: ns},
		{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"},
		{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Namespace: ns},
		{Verb: "create", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
		{Verb: "delete", Resource: "nodes"},
		{Verb: "patch", Group: "coordination.k8s.io", Resource: "leases", Namespace: "purser-system", Name: "purser-agent"},
		{Verb: "delete", Group: "coordination.k8s.io", Resource: "leases", Namespace: "purser-system", Name: "purser-hub"},
	} {
		if can(t, admin, sa, attrs) {
			t.Errorf("the hub may %s %s/%s %s in %q", attrs.Verb, attrs.Group, attrs.Resource, attrs.Name, attrs.Namespace)
		}
	}
}
