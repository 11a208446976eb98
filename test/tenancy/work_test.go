package tenancy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// podJob is a Job whose pod spec carries extra (YAML lines at the pod
// spec's indentation) and whose container's securityContext is sc.
func podJob(name, extra, sc string) string {
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: %s}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
%s
      containers:
      - name: main
        image: busybox
        securityContext: {%s}
`, name, extra, sc)
}

// What a namespace editor's objects may make a member cluster run: the
// high finding of the review was root on a node through a Job. The API
// refuses what the Pod Security Standards' baseline forbids, in the
// library's own words; a row stored behind the API's back is refused by
// the submitter; the namespace purser creates on the member cluster
// carries the enforce label, so that the cluster's own Pod Security
// admission (which the sandbox kube-apiserver runs) holds the same line;
// and a namespace whose level is privileged may run a privileged Job.
func testWhatTheWorkMayDo(t *testing.T, f *farm) {
	for _, tc := range []struct{ what, extra, sc, want string }{
		{"a privileged Job", "", "privileged: true", `privileged (container \"main\" must not set securityContext.privileged=true)`},
		{"a Job in the host's namespaces", "      hostPID: true\n      hostNetwork: true", "", "host namespaces (hostNetwork=true, hostPID=true)"},
		{"a Job mounting the node's root", "      volumes: [{name: root, hostPath: {path: /}}]", "", `hostPath volumes (volume \"root\")`},
		{"a Job as purser's own service account", "      serviceAccountName: purser-agent", "", `service account \"purser-agent\" is one purser's own components run as`},
		{"a Job on a node of its choosing", "      nodeName: " + f.own, "", "places the pod on a node of its choosing"},
	} {
		a := f.refused(tc.what, http.StatusUnprocessableEntity, func() answer {
			return f.yaml("mallory", "POST", "/api/v1/runnables", runnable(f.own, "root", podJob("root", tc.extra, tc.sc)))
		})
		if !strings.Contains(string(a.raw), tc.want) {
			t.Errorf("%s: the answer does not say %s: %s", tc.what, tc.want, a.raw)
		}
	}

	// Behind the API's back: the submitter asks again, with the policy
	// in force, and the cluster never sees the Job.
	ctx := context.Background()
	var tmpl map[string]any
	if err := yamlTo(podJob("stored-priv", "      hostPID: true", "privileged: true"), &tmpl); err != nil {
		t.Fatal(err)
	}
	f.storeBehindTheAPI(ctx, "stored-priv", v1alpha1.RunnableSpec{Template: tmpl})
	f.refusedByTheSubmitter(ctx, "stored-priv", "the stored privileged Job refused by the submitter", "violates PodSecurity")
	f.notOnTheCluster(ctx, "stored-priv")
	kube, err := f.cluster.Client()
	if err != nil {
		t.Fatal(err)
	}

	// A plain Job runs; the namespace purser made for it enforces the level.
	f.yaml("mallory", "POST", "/api/v1/runnables", runnable(f.own, "plain", podJob("plain", "", ""))).want(t, http.StatusAccepted)
	eventually(t, "the plain Job on the member cluster", func() error {
		_, err := kube.BatchV1().Jobs(f.own).Get(ctx, "plain", metav1.GetOptions{})
		return err
	})
	ns, err := kube.CoreV1().Namespaces().Get(ctx, f.own, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "baseline" {
		t.Fatalf("namespace %s on the member cluster: enforce label %q, want baseline (labels %v)", f.own, got, ns.Labels)
	}
	// The member cluster enforces it on its own: a pod mounting the
	// node's root made there directly, past purser, is refused by its
	// kube-apiserver's Pod Security admission.
	var pod map[string]any
	_ = yamlTo(`{apiVersion: v1, kind: Pod, metadata: {name: direct}, spec: {volumes: [{name: root, hostPath: {path: /}}], containers: [{name: c, image: busybox}]}}`, &pod)
	body, _ := json.Marshal(pod)
	res := kube.CoreV1().RESTClient().Post().Namespace(f.own).Resource("pods").Body(body).Do(ctx)
	if err := res.Error(); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Fatalf("a hostPath pod made directly in the namespace purser labelled: %v", err)
	}

	// Where the policy says privileged, what baseline forbids is accepted
	// (the sandbox's kube-apiserver allows no privileged container at
	// all, so the host's namespaces and a hostPath stand for it), and its
	// namespace is labelled so.
	f.yaml("mallory", "POST", "/api/v1/runnables", runnable(f.privileged, "priv",
		podJob("priv", "      hostPID: true\n      volumes: [{name: root, hostPath: {path: /}}]", ""))).want(t, http.StatusAccepted)
	eventually(t, "the privileged Job on the member cluster", func() error {
		_, err := kube.BatchV1().Jobs(f.privileged).Get(ctx, "priv", metav1.GetOptions{})
		return err
	})
	if ns, err := kube.CoreV1().Namespaces().Get(ctx, f.privileged, metav1.GetOptions{}); err != nil || ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Fatalf("namespace %s: %v %v", f.privileged, ns.Labels, err)
	}
}

// The review's findings of objects inside objects: a Workflow whose
// resource template makes a Secret in kube-system, a Secret kept in a
// Workflow's manifest (stored and shown as written), a List deployable
// with a Secret, a RoleBinding granting cluster-admin to everyone.
func testObjectsInsideObjects(t *testing.T, f *farm) {
	f.refused("a Workflow making a Secret in kube-system", http.StatusForbidden, func() answer {
		return f.yaml("mallory", "POST", "/api/v1/runnables", runnable(f.own, "wf", `apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: wf}
spec:
  entrypoint: make
  templates:
  - name: make
    resource:
      action: create
      manifest: |
        apiVersion: v1
        kind: Secret
        metadata: {name: stolen, namespace: kube-system}
        stringData: {token: hunter2}
`))
	})
	for _, tc := range []struct {
		what, method, path, body, want string
	}{
		{"a Secret inside a Workflow", "POST", "/api/v1/runnables", runnable(f.own, "wf2", `apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: wf2}
spec:
  entrypoint: make
  templates:
  - name: make
    resource: {action: create, manifest: '{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"token": "hunter2"}}'}
`), "declare it as a Deployable of its own"},
		{"a List deployable with a Secret", "PUT", "/api/v1/deployables/" + f.own + "/bundle", deployable(f.own, "bundle", `apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Secret, metadata: {name: s}, stringData: {token: hunter2}}
`), "a List is not an object a cluster stores"},
		{"a RoleBinding of cluster-admin to the unauthenticated", "PUT", "/api/v1/deployables/" + f.privileged + "/open", deployable(f.privileged, "open", `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: open}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: Group, name: "system:unauthenticated", apiGroup: rbac.authorization.k8s.io}]
`), `grants ClusterRole \"cluster-admin\"`},
	} {
		a := f.refused(tc.what, http.StatusUnprocessableEntity, func() answer { return f.yaml("mallory", tc.method, tc.path, tc.body) })
		if !strings.Contains(string(a.raw), tc.want) {
			t.Errorf("%s: %s", tc.what, a.raw)
		}
	}
	// The value was never kept: not in any table, not in the history.
	for _, table := range []string{"runnables", "deployables", "audit_log"} {
		var n int
		if err := f.raw.QueryRowContext(t.Context(), storetest.Rebind(f.dsn, "SELECT count(*) FROM "+table+" WHERE CAST("+
			map[string]string{"runnables": "spec", "deployables": "spec", "audit_log": "details"}[table]+" AS TEXT) LIKE ?"), "%hunter2%").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d rows of %s hold the Secret's value in clear", n, table)
		}
	}
}

// The medium finding: a 105 KB YAML body with one 100 KiB anchor
// referenced 1,000 times became a 100 MB object. It is refused with 413,
// and nothing changes.
func testAliasBomb(t *testing.T, f *farm) {
	var b strings.Builder
	b.WriteString("apiVersion: purser.io/v1alpha1\nkind: Deployable\nmetadata: {name: bomb, namespace: " + f.own + "}\nspec:\n  template:\n    apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: bomb}\n    data:\n      a: &big \"")
	b.WriteString(strings.Repeat("x", 100<<10))
	b.WriteString("\"\n      b: [")
	for i := range 1000 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("*big")
	}
	b.WriteString("]\n")
	start := time.Now()
	a := f.refused("a YAML body of aliases", http.StatusRequestEntityTooLarge, func() answer {
		return f.yaml("mallory", "PUT", "/api/v1/deployables/"+f.own+"/bomb", b.String())
	})
	t.Logf("a %d-byte body of aliases refused in %v: %s", b.Len(), time.Since(start).Round(time.Millisecond), a.str("message"))
}

// The low finding: an entry appended to the audit table by someone with
// the database's password, however well chained, fails verify, since it
// carries no MAC of purser's writers.
func testEntryAppendedByHand(t *testing.T, f *farm) {
	storetest.AppendAuditByHand(t, f.dsn, &audit.Entry{Time: time.Now().AddDate(0, -1, 0), Actor: "admin", Action: "approve",
		Kind: "Runnable", Namespace: f.victim, Name: "payroll", Summary: "approved payroll"})
	v := f.do("admin", "GET", "/api/v1/history/verify", nil).want(t, http.StatusOK)
	if v.body["ok"] != false || !strings.Contains(fmt.Sprint(v.body["reason"]), "unsigned: it carries no MAC") {
		t.Fatalf("verify after an entry appended by hand: %s", v.raw)
	}
}

func yamlTo(doc string, out any) error { return yaml.Unmarshal([]byte(doc), out) }
