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

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// What is written is what was checked (issue 33, holes 2, 4, 5 and 10):
// the template passed, and what a writer would apply to the member
// cluster did not: the template with a failover mutation applied, or
// with an override. Each attempt is refused at accept with a 4xx naming
// the mutation or the override, and changes nothing; the same specs
// stored behind the API reach the submitter and the syncer, whose
// admission of the object as written refuses them (AdmissionDenied) with
// nothing created on the member cluster. A Secret's override is sealed
// with its values.
func testRender(t *testing.T, f *farm) {
	withMutation := func(name, tmpl, mutation string) string {
		return runnable(f.own, name, tmpl) + "  failover:\n    mutations: [" + mutation + "]\n"
	}
	const dep = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: main, image: nginx}]
`
	withOverrides := func(ns, name, tmpl, overrides string) string {
		return deployable(ns, name, tmpl) + "  overrides: " + overrides + "\n"
	}
	const wf = `apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: wf}
spec:
  entrypoint: main
  templates: [{name: main, container: {image: busybox}}]
`
	cases := []struct {
		name, method, path, body string
		want                     []string
	}{
		// Hole 2: failover mutations.
		{"MutationHostPID", "POST", "/api/v1/runnables", withMutation("m", job, `{when: "'x' in preserved", path: spec.template.spec.hostPID, value: "true"}`),
			[]string{"spec.failover.mutations[0]", "host namespaces (hostPID=true)"}},
		{"MutationNodeName", "POST", "/api/v1/runnables", withMutation("m", job, `{when: "true", path: spec.template.spec.nodeName, value: "'`+f.own+`'"}`),
			[]string{"spec.failover.mutations[0]", "places the pod on a node of its choosing"}},
		{"MutationPurserAgent", "POST", "/api/v1/runnables", withMutation("m", job, `{when: "true", path: spec.backoffLimit, value: "1"}, {when: "true", path: spec.template.spec.serviceAccountName, value: "'purser-agent'"}`),
			[]string{"spec.failover.mutations[1]", `service account \"purser-agent\"`}},
		{"MutationWorkflowPodSpecPatch", "POST", "/api/v1/runnables", withMutation("wf", wf, `{when: "true", path: spec.podSpecPatch, value: "'{\"hostPID\": true}'"}`),
			[]string{"spec.failover.mutations[0]", "hostPID=true"}},
		// Hole 4: overrides of a deployable.
		{"OverridePrivileged", "PUT", "/api/v1/deployables/" + f.own + "/web", withOverrides(f.own, "web", dep, `[{patch: {spec: {replicas: 2}}}, {patch: [{op: add, path: /spec/template/spec/containers/0/securityContext, value: {privileged: true}}]}]`),
			[]string{"spec.overrides[1]", "privileged"}},
		{"OverrideHostPID", "PUT", "/api/v1/deployables/" + f.own + "/web", withOverrides(f.own, "web", dep, `[{patch: [{op: add, path: /spec/template/spec/hostPID, value: true}]}]`),
			[]string{"spec.overrides[0]", "host namespaces"}},
		{"OverrideNodeName", "PUT", "/api/v1/deployables/" + f.own + "/web", withOverrides(f.own, "web", dep, `[{patch: {spec: {template: {spec: {nodeName: n1}}}}}]`),
			[]string{"spec.overrides[0]", "node of its choosing"}},
		{"OverridePurserAgent", "PUT", "/api/v1/deployables/" + f.own + "/web", withOverrides(f.own, "web", dep, `[{patch: [{op: add, path: /spec/template/spec/serviceAccountName, value: purser-agent}]}]`),
			[]string{"spec.overrides[0]", `service account \"purser-agent\"`}},
		{"OverrideReplacesKind", "PUT", "/api/v1/deployables/" + f.own + "/web", withOverrides(f.own, "web", dep, `[{patch: [{op: replace, path: /kind, value: DaemonSet}]}]`),
			[]string{"spec.overrides[0].patch", "changes kind"}},
		// Hole 10: a ConfigMap made a Secret by its patch, whose value
		// the history would show.
		{"OverrideMakesASecret", "PUT", "/api/v1/deployables/" + f.own + "/cm", withOverrides(f.own, "cm", configMap("cm", "v"), `[{patch: [{op: replace, path: /kind, value: Secret}, {op: add, path: /data/password, value: aHVudGVyMg==}]}]`),
			[]string{"spec.overrides[0].patch", "changes kind"}},
		{"OverrideMovesNamespace", "PUT", "/api/v1/deployables/" + f.own + "/cm", withOverrides(f.own, "cm", configMap("cm", "v"), `[{patch: {metadata: {namespace: kube-system}}}]`),
			[]string{"spec.overrides[0].patch", "changes metadata.namespace"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := f.refused(tc.name, http.StatusUnprocessableEntity, func() answer { return f.yaml("mallory", tc.method, tc.path, tc.body) })
			for _, w := range tc.want {
				if !strings.Contains(string(a.raw), w) {
					t.Errorf("the answer does not say %s: %s", w, a.raw)
				}
			}
		})
	}

	t.Run("MutationOnPUT", func(t *testing.T) {
		a := f.yaml("mallory", "POST", "/api/v1/runnables", withMutation("put", job, `{when: "true", path: spec.backoffLimit, value: "1"}`)).want(t, http.StatusAccepted)
		body := strings.Replace(withMutation("put", job, `{when: "true", path: spec.template.spec.hostPID, value: "true"}`),
			"metadata: {name: put, namespace: "+f.own+"}", "metadata: {name: put, namespace: "+f.own+", resourceVersion: \""+a.str("metadata", "resourceVersion")+"\"}", 1)
		r := f.refused("a PUT adding a mutation to hostPID", http.StatusUnprocessableEntity, func() answer {
			return f.yaml("mallory", "PUT", "/api/v1/runnables/"+f.own+"/put", body)
		})
		if !strings.Contains(string(r.raw), "spec.failover.mutations[0]") {
			t.Errorf("the answer does not name the mutation: %s", r.raw)
		}
	})

	// Hole 5: 16 copies of a 1 KB map in a 2 KB body built 64 MB; each
	// further copy doubles it. 30 copies would be 1 TB.
	t.Run("CopyBomb", func(t *testing.T) {
		ops := []string{`{op: add, path: /data/b, value: {}}`}
		for i := range 30 {
			ops = append(ops, fmt.Sprintf(`{op: copy, from: /data, path: /data/b/c%d}`, i))
		}
		start := time.Now()
		a := f.refused("the copy bomb", http.StatusUnprocessableEntity, func() answer {
			return f.yaml("mallory", "PUT", "/api/v1/deployables/"+f.own+"/bomb",
				withOverrides(f.own, "bomb", configMap("bomb", strings.Repeat("x", 1024)), "[{patch: ["+strings.Join(ops, ", ")+"]}]"))
		})
		if !strings.Contains(string(a.raw), "spec.overrides[0].patch") || !strings.Contains(string(a.raw), "too large as rendered") {
			t.Errorf("the answer does not say the bound: %s", a.raw)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the copy bomb took %s to refuse", d)
		}
	})

	// Hole 10: a Secret's override is sealed as its template is.
	t.Run("SecretOverrideSealed", func(t *testing.T) {
		const value = "hunter2-override"
		f.yaml("mallory", "PUT", "/api/v1/deployables/"+f.own+"/sealed-ovr",
			deployable(f.own, "sealed-ovr", "apiVersion: v1\nkind: Secret\nmetadata: {name: sealed-ovr}\nstringData: {password: base}\n")+
				"  overrides: [{patch: {stringData: {password: "+value+"}}}, {patch: [{op: add, path: /stringData/more, value: "+value+"}]}]\n").want(t, http.StatusCreated)
		for _, path := range []string{"/api/v1/deployables/" + f.own + "/sealed-ovr", "/api/v1/history?namespace=" + f.own} {
			if a := f.do("mallory", "GET", path, nil).want(t, http.StatusOK); strings.Contains(string(a.raw), value) {
				t.Errorf("GET %s shows the override's value: %s", path, a.raw)
			}
		}
		for _, table := range []string{"deployables", "audit_log"} {
			col := map[string]string{"deployables": "spec", "audit_log": "details"}[table]
			var n int
			if err := f.raw.QueryRowContext(t.Context(), storetest.Rebind(f.dsn, "SELECT count(*) FROM "+table+" WHERE CAST("+col+" AS TEXT) LIKE ?"), "%"+value+"%").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%d rows of %s hold the override's value in clear", n, table)
			}
		}
		// The member cluster gets the override's value.
		kube, err := f.cluster.Client()
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the Secret with its override on the member cluster", func() error {
			s, err := kube.CoreV1().Secrets(f.own).Get(t.Context(), "sealed-ovr", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if string(s.Data["password"]) != value || string(s.Data["more"]) != value {
				return fmt.Errorf("keys %d", len(s.Data))
			}
			return nil
		})
	})

	// The writers, reached without the API.
	t.Run("StoredMutationRefusedBySubmitter", func(t *testing.T) { testStoredMutation(t, f) })
	t.Run("StoredOverrideRefusedBySyncer", func(t *testing.T) { testStoredOverride(t, f) })
}

func testStoredMutation(t *testing.T, f *farm) {
	ctx := context.Background()
	var tmpl map[string]any
	if err := yamlTo(podJob("stored-mut", "", ""), &tmpl); err != nil {
		t.Fatal(err)
	}
	spec := v1alpha1.RunnableSpec{Template: tmpl, Failover: &v1alpha1.Failover{Mutations: []v1alpha1.Mutation{
		{When: "true", Path: "spec.template.spec.hostPID", Value: "true"}}}}
	f.storeBehindTheAPI(ctx, "stored-mut", spec)
	f.refusedByTheSubmitter(ctx, "stored-mut", "the stored mutation refused by the submitter", "spec.failover.mutations[0]", "hostPID=true")
	// Through the API, the attempt says the same.
	a := f.do("mallory", "GET", "/api/v1/runnables/"+f.own+"/stored-mut", nil).want(t, http.StatusOK)
	if !strings.Contains(string(a.raw), `"reason":"AdmissionDenied"`) {
		t.Errorf("GET does not show the AdmissionDenied attempt: %s", a.raw)
	}
	f.notOnTheCluster(ctx, "stored-mut")
}

func testStoredOverride(t *testing.T, f *farm) {
	ctx := context.Background()
	var tmpl map[string]any
	if err := yamlTo(`apiVersion: apps/v1
kind: Deployment
metadata: {name: stored-ovr}
spec:
  replicas: 0
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec:
      containers: [{name: main, image: nginx}]
`, &tmpl); err != nil {
		t.Fatal(err)
	}
	spec := v1alpha1.DeployableSpec{Template: tmpl, Overrides: []v1alpha1.Override{
		{Patch: json.RawMessage(`{"spec":{"replicas":0}}`)},
		{Patch: json.RawMessage(`[{"op":"add","path":"/spec/template/spec/serviceAccountName","value":"purser-agent"}]`)},
	}}
	doc, _ := json.Marshal(store.Document[v1alpha1.DeployableSpec]{Spec: spec, Author: &store.Author{Name: "mallory"}})
	uid := "stored-ovr-" + f.own
	if err := f.store.Tx(ctx, func(tx *store.Tx) error {
		return tx.Deployables().Create(ctx, &store.Deployable{Namespace: f.own, Name: "stored-ovr", UID: uid, Generation: 1, Spec: doc, SpecHash: "x"})
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the stored override refused by the syncer", func() error {
		var sts []*store.DeployableClusterStatus
		if err := f.store.Read(ctx, func(tx *store.Tx) (err error) {
			sts, err = tx.Deployables().ListStatus(ctx, uid)
			return err
		}); err != nil {
			return err
		}
		if len(sts) == 0 || sts[0].Reason != "AdmissionDenied" || !strings.Contains(sts[0].Message, "as spec.overrides[1] renders it") ||
			!strings.Contains(sts[0].Message, `service account "purser-agent"`) {
			return fmt.Errorf("statuses %+v", sts)
		}
		return nil
	})
	a := f.do("mallory", "GET", "/api/v1/deployables/"+f.own+"/stored-ovr", nil).want(t, http.StatusOK)
	if !strings.Contains(string(a.raw), `"reason":"AdmissionDenied"`) || !strings.Contains(string(a.raw), "spec.overrides[1]") {
		t.Errorf("GET does not show the refusal: %s", a.raw)
	}
	kube, err := f.cluster.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.AppsV1().Deployments(f.own).Get(ctx, "stored-ovr", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Deployment of a refused override reached the cluster (%v)", err)
	}
}
