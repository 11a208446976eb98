// Package tenancy is the adversarial suite: a hostile tenant, with an
// editor's token in her own namespace, tries each finding of the security
// review (issue 14) and every API family against purser as it runs, with
// a real member cluster acting. Every attempt must fail with the right
// code and change nothing: the rows of every table and the audit log's
// head are compared before and after, and the member cluster is looked at
// directly.
package tenancy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

var metaDelete = metav1.DeleteOptions{}

func TestHostileTenant(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			f := newFarm(t, eng)
			t.Run("ClusterScopedKinds", func(t *testing.T) { testClusterScoped(t, f) })
			t.Run("OtherNamespaces", func(t *testing.T) { testOtherNamespaces(t, f) })
			t.Run("EveryAPIFamily", func(t *testing.T) { testAPIFamilies(t, f) })
			t.Run("ApprovalSwap", func(t *testing.T) { testApprovalSwap(t, f) })
			t.Run("ReviveSkipsApproval", func(t *testing.T) { testRevive(t, f) })
			t.Run("SecretsThroughARunnable", func(t *testing.T) { testSecrets(t, f) })
			t.Run("StoredBehindTheAPI", func(t *testing.T) { testStoredBehindTheAPI(t, f) })
			t.Run("SlowBodies", func(t *testing.T) { testSlowBodies(t, f) })
			t.Run("Watches", func(t *testing.T) { testWatches(t, f) })
			t.Run("Limits", func(t *testing.T) { testLimits(t, f) })
			t.Run("WhatTheWorkMayDo", func(t *testing.T) { testWhatTheWorkMayDo(t, f) })
			t.Run("ObjectsInsideObjects", func(t *testing.T) { testObjectsInsideObjects(t, f) })
			t.Run("AliasBomb", func(t *testing.T) { testAliasBomb(t, f) })
			t.Run("Bounds", func(t *testing.T) { testBounds(t, f) })
			t.Run("Semantics", func(t *testing.T) { testSemantics(t, f) })
			t.Run("Argo", func(t *testing.T) { testArgo(t, f) })
			t.Run("Render", func(t *testing.T) { testRender(t, f) })
			t.Run("RolloutChurn", func(t *testing.T) { testRolloutChurn(t, f) })
			t.Run("UndrivenKind", func(t *testing.T) { testUndrivenKind(t, f) })
			t.Run("Schedules", func(t *testing.T) { testSchedules(t, f) })
			t.Run("Triggers", func(t *testing.T) { testTriggers(t, f) })
			t.Run("Attack", func(t *testing.T) { testAttack(t, f) })
			t.Run("Attack4", func(t *testing.T) { testAttack4(t, f) })
			t.Run("K8sWrite", func(t *testing.T) { testK8sWrite(t, f) })
			t.Run("Drills", func(t *testing.T) { testDrills(t, f) })
			t.Run("Drills2", func(t *testing.T) { testDrills2(t, f) })
			t.Run("Attack5", func(t *testing.T) { testAttack5(t, f) })
			t.Run("K8sWatch", func(t *testing.T) { testK8sWatch(t, f) })
			t.Run("NativeWrites", func(t *testing.T) { testNativeWrites(t, f) })
			t.Run("NativeWrites2", func(t *testing.T) { testNativeWrites2(t, f) })
			t.Run("ForgedConditions", func(t *testing.T) { testForgedConditions(t, f) })
			t.Run("ChainIntact", func(t *testing.T) {
				v := f.do("admin", "GET", "/api/v1/history/verify", nil).want(t, http.StatusOK)
				if v.body["ok"] != true {
					t.Fatalf("after every attempt the chain is broken: %s", v.raw)
				}
			})
			// Last: it breaks the chain on purpose.
			t.Run("EntryAppendedByHand", func(t *testing.T) { testEntryAppendedByHand(t, f) })
		})
	}
}

// The high finding: a namespace editor created cluster-scoped objects on
// every member cluster.
func testClusterScoped(t *testing.T, f *farm) {
	crb := `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: mallory-is-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: User, name: mallory, apiGroup: rbac.authorization.k8s.io}]
`
	a := f.refused("a ClusterRoleBinding to cluster-admin as a Deployable", http.StatusForbidden, func() answer {
		return f.yaml("mallory", "PUT", "/api/v1/deployables/"+f.own+"/crb", deployable(f.own, "crb", crb))
	})
	if !strings.Contains(a.str("message"), "ClusterRoleBinding.rbac.authorization.k8s.io") {
		t.Errorf("the 403 does not name the kind: %s", a.raw)
	}
	f.refused("a ClusterRoleBinding as a Runnable", http.StatusForbidden, func() answer {
		return f.yaml("mallory", "POST", "/api/v1/runnables", runnable(f.own, "crb", crb))
	})
	f.refused("a Namespace named after the victim's", http.StatusForbidden, func() answer {
		return f.yaml("mallory", "POST", "/api/v1/runnables", runnable(f.own, "takeover",
			"apiVersion: v1\nkind: Namespace\nmetadata: {name: "+f.victim+"}\n"))
	})
	f.refused("a RoleBinding where the namespace denies them", http.StatusForbidden, func() answer {
		return f.yaml("mallory", "PUT", "/api/v1/deployables/"+f.own+"/rb", deployable(f.own, "rb", `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: rb}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects: [{kind: User, name: mallory, apiGroup: rbac.authorization.k8s.io}]
`))
	})
	// A kind the member cluster's discovery reports as cluster-scoped, not
	// one of Kubernetes' own: a StorageClass is built in, a CRD would be
	// learned from the agent. The agent's report is awaited.
	eventually(t, "the cluster's kinds reported", func() error {
		var scopes []bool
		err := f.store.Read(context.Background(), func(tx *store.Tx) (err error) {
			scopes, err = tx.Kinds().Scopes(context.Background(), "apiextensions.k8s.io", "CustomResourceDefinition")
			return err
		})
		if err != nil {
			return fmt.Errorf("no report yet: %w", err)
		}
		if len(scopes) == 0 {
			return errors.New("no report yet")
		}
		return nil
	})
	f.refused("a CustomResourceDefinition", http.StatusForbidden, func() answer {
		return f.yaml("mallory", "PUT", "/api/v1/deployables/"+f.own+"/crd", deployable(f.own, "crd",
			"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec: {}\n"))
	})
}

// Namespaces that are not hers, through every door.
func testOtherNamespaces(t *testing.T, f *farm) {
	f.refused("a namespaced object aimed at the victim's namespace", http.StatusUnprocessableEntity, func() answer {
		return f.yaml("mallory", "PUT", "/api/v1/deployables/"+f.own+"/cm", deployable(f.own, "cm",
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: "+f.victim+"}\ndata: {k: v}\n"))
	})
	f.yaml("victor", "PUT", "/api/v1/deployables/"+f.victim+"/app", deployable(f.victim, "app", configMap("app", "victor's"))).want(t, http.StatusCreated)
	f.yaml("victor", "POST", "/api/v1/runnables", runnable(f.victim, "nightly", job)).want(t, http.StatusAccepted)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/v1/runnables?namespace=" + f.victim, ""},
		{"GET", "/api/v1/runnables/" + f.victim + "/nightly", ""},
		{"POST", "/api/v1/runnables", runnable(f.victim, "mine", job)},
		{"DELETE", "/api/v1/runnables/" + f.victim + "/nightly", ""},
		{"POST", "/api/v1/runnables/" + f.victim + "/nightly/approve?resourceVersion=1", ""},
		{"GET", "/api/v1/deployables?namespace=" + f.victim, ""},
		{"GET", "/api/v1/deployables/" + f.victim + "/app", ""},
		{"PUT", "/api/v1/deployables/" + f.victim + "/app", deployable(f.victim, "app", configMap("app", "mallory's"))},
		{"DELETE", "/api/v1/deployables/" + f.victim + "/app", ""},
		{"POST", "/api/v1/deployables/" + f.victim + "/app/reject?resourceVersion=1", ""},
		{"GET", "/api/v1/inventory?namespace=" + f.victim, ""},
		{"GET", "/api/v1/inventory?watch=true&namespace=" + f.victim, ""},
		{"GET", "/api/v1/history?namespace=" + f.victim, ""},
	} {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		f.refused("mallory "+c.method+" "+c.path, http.StatusForbidden, func() answer { return f.do("mallory", c.method, c.path, body) })
	}
}

// Every API family, for what she may not do anywhere.
func testAPIFamilies(t *testing.T, f *farm) {
	cluster := "apiVersion: purser.io/v1alpha1\nkind: Cluster\nmetadata: {name: evil}\nspec: {kubeconfig: x}\n"
	for _, c := range []struct {
		method, path, body string
		code               int
	}{
		{"POST", "/api/v1/clusters", cluster, http.StatusForbidden},
		{"PUT", "/api/v1/clusters/dc1", strings.Replace(cluster, "evil", "dc1", 1), http.StatusForbidden},
		{"DELETE", "/api/v1/clusters/dc1", "", http.StatusForbidden},
		{"GET", "/api/v1/runnables", "", http.StatusForbidden},
		{"GET", "/api/v1/deployables", "", http.StatusForbidden},
		{"GET", "/api/v1/inventory", "", http.StatusForbidden},
		{"GET", "/api/v1/history", "", http.StatusForbidden},
		{"GET", "/api/v1/history/verify", "", http.StatusForbidden},
		{"DELETE", "/api/v1/history", "", http.StatusMethodNotAllowed},
		{"PATCH", "/api/v1/clusters/dc1", "", http.StatusMethodNotAllowed},
		{"POST", "/api/v1/runnables", "{", http.StatusBadRequest},
		{"POST", "/api/v1/runnables", runnable(f.own, "deep", "apiVersion: v1\nkind: ConfigMap\ndata: "+
			strings.Repeat("[", 5000)+strings.Repeat("]", 5000)+"\n"), http.StatusUnprocessableEntity},
	} {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		a := f.refused("mallory "+c.method+" "+c.path, c.code, func() answer { return f.do("mallory", c.method, c.path, body) })
		if c.code == http.StatusMethodNotAllowed && a.header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", c.method, c.path)
		}
	}
	// What every user may do, she may: who she is, which clusters exist
	// (kubeconfigs are never returned).
	who := f.do("mallory", "GET", "/api/v1/whoami", nil).want(t, http.StatusOK)
	if who.body["admin"] != false {
		t.Fatalf("whoami: %s", who.raw)
	}
	if cl := f.do("mallory", "GET", "/api/v1/clusters/dc1", nil).want(t, http.StatusOK); strings.Contains(string(cl.raw), "BEGIN CERTIFICATE") ||
		strings.Contains(string(cl.raw), "token") {
		t.Fatalf("a cluster's credentials were returned: %s", cl.raw)
	}
}

// The medium finding: the author changed a pending deployable between the
// approver's read and the approval.
func testApprovalSwap(t *testing.T, f *farm) {
	path := "/api/v1/deployables/" + f.approval + "/cfg"
	f.yaml("mallory", "PUT", path, deployable(f.approval, "cfg", configMap("cfg", "harmless"))).want(t, http.StatusCreated)
	f.refused("approving her own change", http.StatusForbidden, func() answer {
		rv := f.do("mallory", "GET", path, nil).str("status", "pendingChange", "resourceVersion")
		return f.do("mallory", "POST", path+"/approve?resourceVersion="+rv, nil)
	})
	reviewed := f.do("carol", "GET", path, nil).want(t, http.StatusOK)
	rv := reviewed.str("status", "pendingChange", "resourceVersion")
	if !strings.Contains(string(reviewed.raw), "harmless") || rv == "" {
		t.Fatalf("carol does not see the pending change: %s", reviewed.raw)
	}
	f.yaml("mallory", "PUT", path, deployable(f.approval, "cfg", configMap("cfg", "swapped"))).want(t, http.StatusOK)
	f.refused("approving what was reviewed after a swap", http.StatusConflict, func() answer {
		return f.do("carol", "POST", path+"/approve?resourceVersion="+rv, nil)
	})
	f.refused("approving with no version", http.StatusPreconditionRequired, func() answer {
		return f.do("carol", "POST", path+"/approve", nil)
	})
	if got := f.do("carol", "GET", path, nil); got.str("status", "phase") != "PendingApproval" || got.body["status"].(map[string]any)["generation"] != nil {
		t.Fatalf("the swapped change went live: %s", got.raw)
	}
	// Runnables bind too.
	f.yaml("mallory", "POST", "/api/v1/runnables", runnable(f.approval, "report", job)).want(t, http.StatusAccepted)
	f.refused("approving a runnable at another version", http.StatusConflict, func() answer {
		return f.do("carol", "POST", "/api/v1/runnables/"+f.approval+"/report/approve?resourceVersion=99", nil)
	})
}

// The medium finding: a PUT on a deleted-but-not-removed deployable
// cleared its deletion at once, skipping approval.
func testRevive(t *testing.T, f *farm) {
	path := "/api/v1/deployables/" + f.approval + "/old"
	decide := func(verb string) {
		t.Helper()
		rv := f.do("carol", "GET", path, nil).str("status", "pendingChange", "resourceVersion")
		f.do("carol", "POST", path+"/"+verb+"?resourceVersion="+rv, nil).want(t, http.StatusOK)
	}
	// A second cluster, down: a deleted deployable stays a tombstone until
	// every cluster confirms its copy is gone, which this one cannot.
	kc, err := f.cluster.Kubeconfig("https://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"apiVersion": "purser.io/v1alpha1", "kind": "Cluster",
		"metadata": map[string]any{"name": "down"}, "spec": map[string]any{"kubeconfig": string(kc)}})
	f.do("admin", "POST", "/api/v1/clusters", body).want(t, http.StatusCreated)
	defer f.do("admin", "DELETE", "/api/v1/clusters/down", nil).want(t, http.StatusOK)
	f.yaml("mallory", "PUT", path, deployable(f.approval, "old", configMap("old", "v1"))).want(t, http.StatusCreated)
	decide("approve")
	f.do("mallory", "DELETE", path, nil).want(t, http.StatusOK)
	decide("approve")
	var deleted *time.Time
	read := func() *store.Deployable {
		var d *store.Deployable
		if err := f.store.Read(context.Background(), func(tx *store.Tx) (err error) {
			d, err = tx.Deployables().Get(context.Background(), f.approval, "old")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	before := read()
	if deleted = before.DeletedAt; deleted == nil {
		t.Fatal("the deletion was not kept while a cluster still holds a copy")
	}
	r := f.yaml("mallory", "PUT", path, deployable(f.approval, "old", configMap("old", "revived")))
	after := read()
	if r.str("status", "phase") != "PendingApproval" || after.DeletedAt == nil || after.Generation != before.Generation || !bytes.Equal(after.Spec, before.Spec) {
		t.Fatalf("a revive skipped approval: %d %s; deleted %v, generation %d -> %d", r.code, r.raw, after.DeletedAt, before.Generation, after.Generation)
	}
}

// The medium finding: Secret values leaked through a Runnable, the audit
// log, and the inventory's unkeyed hash.
func testSecrets(t *testing.T, f *farm) {
	const value = "correct-horse-battery-staple"
	f.refused("a Secret as a Runnable", http.StatusUnprocessableEntity, func() answer {
		return f.yaml("mallory", "POST", "/api/v1/runnables", runnable(f.own, "leak",
			"apiVersion: v1\nkind: Secret\nmetadata: {name: leak}\nstringData: {password: "+value+"}\n"))
	})
	// As a Deployable it is sealed, applied to the cluster, and its value
	// is nowhere in the database: not in the spec, the audit log, nor the
	// inventory, which keeps only a digest keyed with the hub's key.
	f.yaml("mallory", "PUT", "/api/v1/deployables/"+f.own+"/creds", deployable(f.own, "creds",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\nstringData: {password: "+value+"}\n")).want(t, http.StatusCreated)
	const inConfigMap = "a-value-in-a-configmap"
	f.yaml("mallory", "PUT", "/api/v1/deployables/"+f.own+"/settings", deployable(f.own, "settings", configMap("settings", inConfigMap))).want(t, http.StatusCreated)
	kube, err := f.cluster.Client()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Secret on the cluster", func() error {
		s, err := kube.CoreV1().Secrets(f.own).Get(context.Background(), "creds", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if string(s.Data["password"]) != value {
			return fmt.Errorf("data %v", s.Data)
		}
		return nil
	})
	var object string
	eventually(t, "the Secret in the inventory", func() error {
		return f.raw.QueryRowContext(t.Context(), storetest.Rebind(f.dsn, `SELECT object FROM inventory WHERE kind = 'Secret' AND namespace = ? AND name = 'creds'`), f.own).Scan(&object)
	})
	guess, _ := json.Marshal(map[string]string{"password": base64.StdEncoding.EncodeToString([]byte(value))})
	bare := sha256.Sum256(guess)
	if !strings.Contains(object, `"dataHMAC"`) || strings.Contains(object, hex.EncodeToString(bare[:])) {
		t.Errorf("the inventory's Secret record: %s", object)
	}
	for _, needle := range []string{value, base64.StdEncoding.EncodeToString([]byte(value)), hex.EncodeToString(bare[:])} {
		for _, q := range []string{
			`SELECT COUNT(*) FROM deployables WHERE spec LIKE ? OR pending LIKE ?`,
			`SELECT COUNT(*) FROM audit_log WHERE details LIKE ? OR summary LIKE ?`,
			`SELECT COUNT(*) FROM inventory WHERE object LIKE ? OR object LIKE ?`,
		} {
			var n int
			pat := "%" + needle + "%"
			if err := f.raw.QueryRowContext(t.Context(), storetest.Rebind(f.dsn, q), pat, pat).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%q is in the database: %s", needle, q)
			}
		}
	}
	// A ConfigMap is no secret: its value is in its spec and inventory
	// record, but the audit log, which every viewer reads, redacts data
	// whatever the kind.
	var n int
	if err := f.raw.QueryRowContext(t.Context(), storetest.Rebind(f.dsn, `SELECT COUNT(*) FROM audit_log WHERE details LIKE ?`), "%"+inConfigMap+"%").Scan(&n); err != nil || n != 0 {
		t.Errorf("the audit log holds a ConfigMap's data (%d rows, %v)", n, err)
	}
}

// The high finding again, from the side of stored state: rows written
// behind the API (or before a rule) are checked by the submitter and the
// syncer before they act on the member cluster.
func testStoredBehindTheAPI(t *testing.T, f *farm) {
	ctx := context.Background()
	author := &store.Author{Name: "mallory"}
	roleName := "stored-" + f.own
	role := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": roleName},
		"rules":    []any{map[string]any{"apiGroups": []any{"*"}, "resources": []any{"*"}, "verbs": []any{"*"}}}}
	rdoc, _ := json.Marshal(store.Document[v1alpha1.RunnableSpec]{Spec: v1alpha1.RunnableSpec{Template: role}, Author: author})
	ddoc, _ := json.Marshal(store.Document[v1alpha1.DeployableSpec]{Spec: v1alpha1.DeployableSpec{Template: role}, Author: author})
	if err := f.store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.Runnables().Create(ctx, &store.Runnable{Namespace: f.own, Name: "stored", UID: "stored-r-" + f.own, Generation: 1,
			Spec: rdoc, SpecHash: "x", Phase: string(v1alpha1.PhaseQueued), Submitter: "mallory"}); err != nil {
			return err
		}
		return tx.Deployables().Create(ctx, &store.Deployable{Namespace: f.own, Name: "stored", UID: "stored-d-" + f.own, Generation: 1,
			Spec: ddoc, SpecHash: "x"})
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the stored runnable refused by the submitter", func() error {
		var r *store.Runnable
		var attempts []*store.Attempt
		err := f.store.Read(ctx, func(tx *store.Tx) (err error) {
			if r, err = tx.Runnables().Get(ctx, f.own, "stored"); err != nil {
				return err
			}
			attempts, err = tx.Attempts().List(ctx, r.UID)
			return err
		})
		if err != nil {
			return err
		}
		if r.Phase != string(v1alpha1.PhaseFailed) || len(attempts) == 0 || attempts[0].Reason != "ForbiddenByPolicy" {
			return fmt.Errorf("phase %s, attempts %+v", r.Phase, attempts)
		}
		return nil
	})
	eventually(t, "the stored deployable refused by the syncer", func() error {
		var sts []*store.DeployableClusterStatus
		if err := f.store.Read(ctx, func(tx *store.Tx) (err error) {
			sts, err = tx.Deployables().ListStatus(ctx, "stored-d-"+f.own)
			return err
		}); err != nil {
			return err
		}
		if len(sts) != 1 || sts[0].State != string(v1alpha1.StateError) || !strings.Contains(sts[0].Message, "refused by the policy") {
			return fmt.Errorf("status %+v", sts)
		}
		return nil
	})
	kube, err := f.cluster.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoles().Get(ctx, roleName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a ClusterRole stored behind the API reached the cluster (%v)", err)
	}
}

// The medium finding: unauthenticated slow bodies held connections.
func testSlowBodies(t *testing.T, f *farm) {
	u, _ := url.Parse(f.url)
	before := f.state()
	const conns = 50
	var d net.Dialer
	for i := range conns {
		conn, err := d.DialContext(t.Context(), "tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "POST /api/v1/runnables HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000\r\nContent-Type: application/yaml\r\n\r\na", u.Host)
		if err := conn.SetReadDeadline(time.Now().Add(wait)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("connection %d: no answer before the body came: %v", i, err)
		}
		// The close checked below may cut the answer's body short.
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("connection %d: %d", i, resp.StatusCode)
		}
		if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("connection %d stays open after the answer (%v)", i, err)
		}
	}
	if after := f.state(); after != before {
		t.Fatalf("slow bodies changed the database: %s -> %s", before, after)
	}
}

// The medium finding: inventory watches without a cap.
func testWatches(t *testing.T, f *farm) {
	var open []context.CancelFunc
	defer func() {
		for _, c := range open {
			c()
		}
	}()
	for i := range 9 {
		ctx, cancel := context.WithCancel(context.Background())
		open = append(open, cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", f.url+"/api/v1/inventory?watch=true&fields=meta&namespace="+f.own, http.NoBody)
		req.Header.Set("Authorization", "Bearer "+f.tokens["mallory"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if i < 8 {
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("watch %d: %d", i, resp.StatusCode)
			}
			continue // left open
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("a ninth watch: %d %s", resp.StatusCode, raw)
		}
	}
}

// The low findings: failed authentication unlimited, no security headers.
func testLimits(t *testing.T, f *farm) {
	f.tokens["guess"] = "0000"
	before := f.state()
	limited := false
	for range 50 {
		a := f.do("guess", "GET", "/api/v1/whoami", nil)
		if a.code == http.StatusTooManyRequests {
			limited = a.header.Get("Retry-After") != ""
			break
		}
		if a.code != http.StatusUnauthorized {
			t.Fatalf("a guessed token: %d", a.code)
		}
	}
	if !limited {
		t.Fatal("fifty guessed tokens in a row were all answered 401, none 429 with Retry-After")
	}
	if after := f.state(); after != before {
		t.Fatalf("guessing changed the database: %s -> %s", before, after)
	}
	for _, path := range []string{"/", "/api/v1/whoami"} {
		a := f.do("admin", "GET", path, nil)
		if a.header.Get("Content-Security-Policy") == "" || a.header.Get("X-Content-Type-Options") != "nosniff" ||
			a.header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s lacks security headers: %v", path, a.header)
		}
	}
}
