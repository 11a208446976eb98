package tenancy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// Media types of the writes below.
const (
	ctJSON  = "application/json"
	ctMerge = "application/merge-patch+json"
	ctJSONP = "application/json-patch+json"
)

// under is f with its assertions made on t: each case of testNativeWrites2
// fails on its own, and the others still run.
func (f *farm) under(t *testing.T) *farm {
	g := *f
	g.t = t
	return &g
}

// refusedWith is refused for a refusal that may take one of codes (a
// precondition is 400 or 409 depending on the server's reading of it).
func (f *farm) refusedWith(what string, codes []int, attempt func() answer) answer {
	f.t.Helper()
	before := f.state()
	a := attempt()
	if !slices.Contains(codes, a.code) {
		f.t.Errorf("%s: %d %s, want one of %v", what, a.code, a.raw, codes)
	}
	if after := f.state(); after != before {
		f.t.Errorf("%s changed the database: %s -> %s", what, before, after)
	}
	return a
}

// auditRows counts the audit entries of actor about runnable ns/name.
func (f *farm) auditRows(actor, ns, name string) int {
	f.t.Helper()
	var n int
	if err := f.raw.QueryRowContext(f.t.Context(), storetest.Rebind(f.dsn,
		`SELECT COUNT(*) FROM audit_log WHERE actor = ? AND kind = 'Runnable' AND namespace = ? AND name = ?`), actor, ns, name).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// nativeCreate writes a Job through /k8s as user and wants it created.
func (f *farm) nativeCreate(user, ns, name, extra string) answer {
	f.t.Helper()
	return f.send(user, "POST", nativePath(ns, ""), ctJSON, nativeJob(f.t, ns, name, extra)).want(f.t, http.StatusCreated)
}

// nativeJobMeta is nativeJob with labels and annotations in its metadata.
func nativeJobMeta(t *testing.T, ns, name string, labels, annotations map[string]string) []byte {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal(nativeJob(t, ns, name, ""), &obj); err != nil {
		t.Fatal(err)
	}
	md := obj["metadata"].(map[string]any)
	if labels != nil {
		md["labels"] = labels
	}
	if annotations != nil {
		md["annotations"] = annotations
	}
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// annotation reads one annotation of a native object as /k8s answered it.
func (a answer) annotation(key string) string {
	md, _ := a.body["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	s, _ := ann[key].(string)
	return s
}

// testNativeWrites2: more of mallory against native writes through /k8s.
// Each attempt is its own case; a case that fails is a hole, asserted as
// the refusal it should be.
func testNativeWrites2(t *testing.T, f *farm) {
	own, appr := f.own, f.approval
	eventually(t, "Jobs served through /k8s", func() error {
		if a := f.do("mallory", "GET", nativePath(own, ""), nil); a.code != http.StatusOK {
			return fmt.Errorf("%d %s", a.code, a.raw)
		}
		return nil
	})
	atLeastOnce := "failover: {consistency: AtLeastOne}\n"
	for _, ns := range []string{own, appr} {
		f.yaml("mallory", "PUT", "/api/v1/placementpolicies/"+ns+"/n2-jobs",
			strings.Replace(placementPolicy("PlacementPolicy", ns, "n2-jobs", atLeastOnce),
				"[{apiVersion: batch/v1, kind: Job}]", "[{apiVersion: batch/v1, kind: Job, labelSelector: {matchExpressions: [{key: n2, operator: DoesNotExist}]}}]", 1)).want(t, http.StatusCreated)
	}
	defer func() {
		for _, ns := range []string{own, appr} {
			f.do("mallory", "DELETE", "/api/v1/placementpolicies/"+ns+"/n2-jobs", nil)
		}
	}()
	rest := func(ns, name string) string { return "/api/v1/runnables/" + ns + "/" + name }
	// Every runnable made here is cancelled and removed at the end.
	var made [][2]string
	defer func() {
		for _, m := range made {
			f.do("mallory", "DELETE", rest(m[0], m[1]), nil)
		}
	}()
	track := func(ns, name string) { made = append(made, [2]string{ns, name}) }

	// Approval: a native create in a namespace that needs approval waits
	// for it, as the REST create does; a change of what waits is refused.
	t.Run("ApprovalNotSkipped", func(t *testing.T) {
		g := f.under(t)
		track(appr, "n2-wait")
		a := g.nativeCreate("mallory", appr, "n2-wait", "")
		if p := a.annotation("purser.io/phase"); p != "PendingApproval" {
			t.Errorf("a native create in %s is %q, not PendingApproval: %s", appr, p, a.raw)
		}
		if p := g.do("carol", "GET", rest(appr, "n2-wait"), nil).str("status", "phase"); p != "PendingApproval" {
			t.Errorf("the runnable is %s", p)
		}
		g.refused("a merge patch of the Job that waits for approval", http.StatusConflict, func() answer {
			return g.send("mallory", "PATCH", nativePath(appr, "n2-wait"), ctMerge,
				[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"evil"}]}}}}`))
		})
		g.refused("a PUT of the Job that waits for approval", http.StatusConflict, func() answer {
			return g.send("mallory", "PUT", nativePath(appr, "n2-wait"), ctJSON,
				bytes.Replace(nativeJob(t, appr, "n2-wait", ""), []byte("busybox"), []byte("evil"), 1))
		})
		g.refused("approving her own native Job", http.StatusForbidden, func() answer {
			rv := g.do("carol", "GET", rest(appr, "n2-wait"), nil).str("metadata", "resourceVersion")
			return g.do("mallory", "POST", rest(appr, "n2-wait")+"/approve?resourceVersion="+rv, nil)
		})
	})

	// Approval swap through a re-create: carol reviews a Job at a
	// version; mallory deletes it through /k8s and creates another of the
	// same name, whose runnable starts again at the same version. The
	// approval of what carol reviewed must not approve what replaced it.
	t.Run("SwapByRecreate", func(t *testing.T) {
		g := f.under(t)
		track(appr, "n2-swap")
		g.nativeCreate("mallory", appr, "n2-swap", "")
		reviewed := g.do("carol", "GET", rest(appr, "n2-swap"), nil).want(t, http.StatusOK)
		rv, uid := reviewed.str("metadata", "resourceVersion"), reviewed.str("metadata", "uid")
		g.send("mallory", "DELETE", nativePath(appr, "n2-swap"), "", nil).want(t, http.StatusOK)
		swapped := g.send("mallory", "POST", nativePath(appr, ""), ctJSON,
			bytes.Replace(nativeJob(t, appr, "n2-swap", ""), []byte("busybox"), []byte("evil.example/miner"), 1))
		if swapped.code != http.StatusCreated {
			t.Logf("the re-create was refused (%d %s): no swap", swapped.code, swapped.raw)
			return
		}
		a := g.do("carol", "POST", rest(appr, "n2-swap")+"/approve?resourceVersion="+rv, nil)
		now := g.do("carol", "GET", rest(appr, "n2-swap"), nil)
		if a.code == http.StatusOK {
			t.Errorf("HOLE: carol approved resourceVersion %s of runnable %s (uid %s, busybox) and approved its replacement (uid %s, image %q, phase %s): %s",
				rv, "n2-swap", uid, now.str("metadata", "uid"), "evil.example/miner", now.str("status", "phase"), a.raw)
		} else if a.code != http.StatusConflict {
			t.Errorf("approving a replaced runnable: %d %s, want 409", a.code, a.raw)
		}
	})

	// A delete's options in its body (kubectl delete --dry-run=server
	// sends them there): a dry run changes nothing, a precondition that
	// does not hold refuses the delete.
	t.Run("DeleteOptionsBody", func(t *testing.T) {
		g := f.under(t)
		track(own, "n2-dry")
		track(own, "n2-pre")
		g.nativeCreate("mallory", own, "n2-dry", "")
		g.nativeCreate("mallory", own, "n2-pre", "")
		g.refused("a native delete whose DeleteOptions say dryRun: [All]", http.StatusOK, func() answer {
			return g.send("mallory", "DELETE", nativePath(own, "n2-dry"), ctJSON, []byte(`{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}`))
		})
		if p := g.do("mallory", "GET", rest(own, "n2-dry"), nil).str("status", "phase"); p == "Cancelled" {
			t.Errorf("HOLE: a dry-run delete (DeleteOptions.dryRun in the body) cancelled the runnable")
		}
		g.refusedWith("a native delete whose precondition names another uid", []int{http.StatusBadRequest, http.StatusConflict}, func() answer {
			return g.send("mallory", "DELETE", nativePath(own, "n2-pre"), ctJSON, []byte(`{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"not-its-uid"}}`))
		})
		if p := g.do("mallory", "GET", rest(own, "n2-pre"), nil).str("status", "phase"); p == "Cancelled" {
			t.Errorf("HOLE: a delete whose precondition does not hold cancelled the runnable")
		}
	})

	// What /k8s adds to a native object when it reads it back (purser's
	// view: purser.io/phase, attempt, runnable, placement-policy) is not
	// the user's: an empty patch of the object read back writes nothing,
	// and those annotations never reach the runnable's template.
	t.Run("ViewAnnotationsStayOut", func(t *testing.T) {
		g := f.under(t)
		track(own, "n2-noop")
		g.nativeCreate("mallory", own, "n2-noop", "")
		// What kubectl apply sends for an unchanged object, kubectl
		// annotate's and label's too: the object read back, patched.
		if a := g.refused("an empty merge patch", http.StatusOK, func() answer {
			return g.send("mallory", "PATCH", nativePath(own, "n2-noop"), ctMerge, []byte(`{}`))
		}); a.code != http.StatusOK {
			t.Errorf("HOLE: an empty patch is a change of the runnable's template (purser's view annotations were written into it): %d", a.code)
		}
		r := g.do("mallory", "GET", rest(own, "n2-noop"), nil).want(t, http.StatusOK)
		tmpl, _ := r.body["spec"].(map[string]any)["template"].(map[string]any)
		md, _ := tmpl["metadata"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		for _, k := range []string{"purser.io/phase", "purser.io/attempt", "purser.io/runnable", "purser.io/placement-policy", "purser.io/cluster"} {
			if _, ok := ann[k]; ok {
				t.Errorf("HOLE: the runnable's template carries purser's view annotation %s after a patch: %v", k, ann)
			}
		}
	})

	// The object's identity is the path's: a patch cannot rename it, move
	// it, or pin a version it is not at.
	t.Run("PatchIdentity", func(t *testing.T) {
		g := f.under(t)
		track(own, "n2-id")
		g.nativeCreate("mallory", own, "n2-id", "")
		g.refused("a PUT whose body names another object", http.StatusBadRequest, func() answer {
			return g.send("mallory", "PUT", nativePath(own, "n2-id"), ctJSON, nativeJob(t, own, "n2-other", ""))
		})
		g.refused("a merge patch renaming the object", http.StatusBadRequest, func() answer {
			return g.send("mallory", "PATCH", nativePath(own, "n2-id"), ctMerge, []byte(`{"metadata":{"name":"n2-other"}}`))
		})
		g.refused("a merge patch moving the object to the victim's namespace", http.StatusBadRequest, func() answer {
			return g.send("mallory", "PATCH", nativePath(own, "n2-id"), ctMerge, []byte(`{"metadata":{"namespace":"`+f.victim+`"}}`))
		})
		g.refused("a JSON patch moving the object", http.StatusBadRequest, func() answer {
			return g.send("mallory", "PATCH", nativePath(own, "n2-id"), ctJSONP, []byte(`[{"op":"replace","path":"/metadata/namespace","value":"`+f.victim+`"}]`))
		})
		g.refused("a merge patch pinning a version it is not at", http.StatusConflict, func() answer {
			return g.send("mallory", "PATCH", nativePath(own, "n2-id"), ctMerge, []byte(`{"metadata":{"resourceVersion":"999"},"spec":{"parallelism":2}}`))
		})
		g.refused("a JSON patch making it a Deployment", http.StatusUnprocessableEntity, func() answer {
			return g.send("mallory", "PATCH", nativePath(own, "n2-id"), ctJSONP, []byte(`[{"op":"replace","path":"/kind","value":"Deployment"}]`))
		})
		g.refused("a JSON patch removing the object", http.StatusUnprocessableEntity, func() answer {
			return g.send("mallory", "PATCH", nativePath(own, "n2-id"), ctJSONP, []byte(`[{"op":"replace","path":"","value":null}]`))
		})
	})

	// The policy is chosen again at each write: a relabelling that hands
	// the object to a policy asking for what she may not have is refused
	// as its create would be, and one no policy selects is refused too.
	t.Run("RelabelToAnotherPolicy", func(t *testing.T) {
		g := f.under(t)
		g.yaml("mallory", "PUT", "/api/v1/placementpolicies/"+own+"/n2-crit", strings.Replace(
			placementPolicy("PlacementPolicy", own, "n2-crit", "priority: critical\n"),
			"[{apiVersion: batch/v1, kind: Job}]", "[{apiVersion: batch/v1, kind: Job, labelSelector: {matchLabels: {n2: crit}}}]", 1)).want(t, http.StatusCreated)
		defer g.do("mallory", "DELETE", "/api/v1/placementpolicies/"+own+"/n2-crit", nil)
		track(own, "n2-relabel")
		g.nativeCreate("mallory", own, "n2-relabel", "")
		g.refused("a PUT relabelling her Job for the policy of the victim's priority class", http.StatusUnprocessableEntity, func() answer {
			return g.send("mallory", "PUT", nativePath(own, "n2-relabel"), ctJSON, nativeJobMeta(t, own, "n2-relabel", map[string]string{"n2": "crit"}, nil))
		})
		g.refused("a merge patch relabelling her Job for it", http.StatusUnprocessableEntity, func() answer {
			return g.send("mallory", "PATCH", nativePath(own, "n2-relabel"), ctMerge, []byte(`{"metadata":{"labels":{"n2":"crit"}}}`))
		})
		g.refused("a merge patch relabelling her Job out of every policy", http.StatusUnprocessableEntity, func() answer {
			return g.send("mallory", "PATCH", nativePath(own, "n2-relabel"), ctMerge, []byte(`{"metadata":{"labels":{"n2":"none"}}}`))
		})
		g.refused("a create her policy gives the victim's priority class", http.StatusUnprocessableEntity, func() answer {
			return g.send("mallory", "POST", nativePath(own, ""), ctJSON, nativeJobMeta(t, own, "n2-crit", map[string]string{"n2": "crit"}, nil))
		})
	})

	// The farm's policy and hers: hers may outrank it in her namespace
	// (the highest priority wins), but what it gives is still admitted as
	// hers, and it never reaches another namespace's objects.
	t.Run("OutrankTheFarm", func(t *testing.T) {
		g := f.under(t)
		g.yaml("admin", "PUT", "/api/v1/clusterplacementpolicies/n2-farm",
			placementPolicy("ClusterPlacementPolicy", "", "n2-farm", atLeastOnce)).want(t, http.StatusCreated)
		defer g.do("admin", "DELETE", "/api/v1/clusterplacementpolicies/n2-farm", nil)
		g.yaml("mallory", "PUT", "/api/v1/placementpolicies/"+own+"/n2-top", strings.Replace(
			placementPolicy("PlacementPolicy", own, "n2-top", "priority: critical\n"), "  runnable:", "  priority: 1000000\n  runnable:", 1)).want(t, http.StatusCreated)
		defer g.do("mallory", "DELETE", "/api/v1/placementpolicies/"+own+"/n2-top", nil)
		g.refused("a Job her outranking policy gives the victim's priority class", http.StatusUnprocessableEntity, func() answer {
			return g.send("mallory", "POST", nativePath(own, ""), ctJSON, nativeJob(t, own, "n2-top", ""))
		})
		for _, c := range []struct {
			method, ct string
			body       []byte
		}{
			{"PUT", "application/yaml", []byte(placementPolicy("ClusterPlacementPolicy", "", "n2-farm", "priority: critical\n"))},
			{"PATCH", ctMerge, []byte(`{"spec":{"priority":-1}}`)},
			{"DELETE", "", nil},
		} {
			g.refused(c.method+" of the farm's policy through /k8s", http.StatusForbidden, func() answer {
				return g.send("mallory", c.method, k8s("", "clusterplacementpolicies", "n2-farm"), c.ct, c.body)
			})
		}
		g.refusedWith("a policy whose priority overflows", []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, func() answer {
			return g.yaml("mallory", "PUT", "/api/v1/placementpolicies/"+own+"/n2-huge", strings.Replace(
				placementPolicy("PlacementPolicy", own, "n2-huge", atLeastOnce), "  runnable:", "  priority: 4294967297\n  runnable:", 1))
		})
		g.refused("a policy outranking the farm's in the victim's namespace", http.StatusForbidden, func() answer {
			return g.yaml("mallory", "PUT", "/api/v1/placementpolicies/"+f.victim+"/n2-top", strings.Replace(
				placementPolicy("PlacementPolicy", f.victim, "n2-top", atLeastOnce), "  runnable:", "  priority: 1000000\n  runnable:", 1))
		})
		v := g.nativeCreate("victor", f.victim, "n2-victor", "")
		if p := v.annotation("purser.io/placement-policy"); p != "ClusterPlacementPolicy n2-farm" {
			t.Errorf("victor's Job was placed by %q, not the farm's policy", p)
		}
		g.do("victor", "DELETE", rest(f.victim, "n2-victor"), nil)
	})

	// The victim's objects: not hers to read, change or delete, whatever
	// the verb, and her reads of the kind there are refused too.
	t.Run("VictimsObject", func(t *testing.T) {
		g := f.under(t)
		g.yaml("admin", "PUT", "/api/v1/clusterplacementpolicies/n2-farm2",
			placementPolicy("ClusterPlacementPolicy", "", "n2-farm2", atLeastOnce)).want(t, http.StatusCreated)
		defer g.do("admin", "DELETE", "/api/v1/clusterplacementpolicies/n2-farm2", nil)
		g.nativeCreate("victor", f.victim, "n2-private", "")
		defer g.do("victor", "DELETE", rest(f.victim, "n2-private"), nil)
		for _, c := range []struct {
			method, path, ct string
			body             []byte
		}{
			{"GET", nativePath(f.victim, "n2-private"), "", nil},
			{"GET", nativePath(f.victim, ""), "", nil},
			{"GET", nativePath(f.victim, "") + "?watch=true", "", nil},
			{"DELETE", nativePath(f.victim, "n2-private"), "", nil},
			{"PATCH", nativePath(f.victim, "n2-private"), ctMerge, []byte(`{"spec":{"parallelism":0}}`)},
			{"PUT", nativePath(f.victim, "n2-private"), ctJSON, nativeJob(t, f.victim, "n2-private", "")},
			{"POST", nativePath(f.victim, "") + "?dryRun=All", ctJSON, nativeJob(t, f.victim, "n2-probe", "")},
		} {
			a := g.refused("mallory "+c.method+" "+c.path, http.StatusForbidden, func() answer { return g.send("mallory", c.method, c.path, c.ct, c.body) })
			if strings.Contains(string(a.raw), "busybox") || strings.Contains(string(a.raw), "n2-farm2") {
				t.Errorf("%s %s tells her of the victim's object: %s", c.method, c.path, a.raw)
			}
		}
		if a := g.do("mallory", "GET", "/k8s/apis/batch/v1/jobs", nil); a.code == http.StatusOK && strings.Contains(string(a.raw), "n2-private") {
			t.Errorf("a list of Jobs of every namespace shows her the victim's: %s", a.raw)
		}
	})

	// Another kind's runnable of the same name is not a Job's to delete
	// or replace.
	t.Run("AnotherKindsName", func(t *testing.T) {
		g := f.under(t)
		track(own, "n2-cm")
		g.yaml("mallory", "POST", "/api/v1/runnables", runnable(own, "n2-cm", configMap("n2-cm", "v"))).want(t, http.StatusAccepted)
		g.refused("a native DELETE, as a Job, of her ConfigMap's runnable", http.StatusMethodNotAllowed, func() answer {
			return g.send("mallory", "DELETE", nativePath(own, "n2-cm"), "", nil)
		})
		g.refused("a native PUT, as a Job, of her ConfigMap's runnable", http.StatusMethodNotAllowed, func() answer {
			return g.send("mallory", "PUT", nativePath(own, "n2-cm"), ctJSON, nativeJob(t, own, "n2-cm", ""))
		})
		if a := g.do("mallory", "GET", nativePath(own, "n2-cm"), nil); a.code == http.StatusOK && a.annotation("purser.io/runnable") != "" {
			t.Errorf("a Job read of a ConfigMap's runnable answers it: %s", a.raw)
		}
		g.refused("a POST on an object's path", http.StatusMethodNotAllowed, func() answer {
			return g.send("mallory", "POST", nativePath(own, "n2-cm"), ctJSON, nativeJob(t, own, "n2-cm", ""))
		})
		g.refused("a PUT creating an object", http.StatusMethodNotAllowed, func() answer {
			return g.send("mallory", "PUT", nativePath(own, "n2-absent"), ctJSON, nativeJob(t, own, "n2-absent", ""))
		})
	})

	// Names: a runnable's name is a DNS subdomain, as an object's is, so a
	// dotted or long name is taken as the REST create takes it (what the
	// kind itself refuses, a Job name over 63 characters, is the cluster's
	// to refuse at the attempt); names that are no names are refused.
	t.Run("Names", func(t *testing.T) {
		g := f.under(t)
		for _, name := range []string{"n2.dotted", "n2-" + strings.Repeat("x", 70)} {
			track(own, name)
			a := g.send("mallory", "POST", nativePath(own, ""), ctJSON, []byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"`+name+`"},"spec":{}}`))
			via := g.yaml("mallory", "POST", "/api/v1/runnables", runnable(own, name+"r", job))
			track(own, name+"r")
			if (a.code == http.StatusCreated) != (via.code == http.StatusAccepted) {
				t.Errorf("a Job named %s: %d through /k8s, %d through the REST API: %s", name, a.code, via.code, a.raw)
			}
		}
		g.refused("a Job named in capitals", http.StatusUnprocessableEntity, func() answer {
			return g.send("mallory", "POST", nativePath(own, ""), ctJSON, []byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"N2Upper"},"spec":{}}`))
		})
		g.refused("a Job without a name, generateName only", http.StatusUnprocessableEntity, func() answer {
			return g.send("mallory", "POST", nativePath(own, ""), ctJSON, []byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"generateName":"n2-"},"spec":{}}`))
		})
		g.refusedWith("a Job named with a slash", []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, func() answer {
			return g.send("mallory", "POST", nativePath(own, ""), ctJSON, []byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"../`+f.victim+`/x"},"spec":{}}`))
		})
		g.refusedWith("a name that is a number", []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, func() answer {
			return g.send("mallory", "POST", nativePath(own, ""), ctJSON, []byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":7},"spec":{}}`))
		})
	})

	// dryRun=All leaves no trace: no runnable, no audit entry, whatever the
	// verb, in a namespace that needs approval too.
	t.Run("DryRunNoTrace", func(t *testing.T) {
		g := f.under(t)
		g.refused("a dry-run create in the approval namespace", http.StatusCreated, func() answer {
			return g.send("mallory", "POST", nativePath(appr, "")+"?dryRun=All", ctJSON, nativeJob(t, appr, "n2-dryrun", ""))
		})
		track(own, "n2-dry2")
		g.nativeCreate("mallory", own, "n2-dry2", "")
		g.refused("a dry-run delete", http.StatusOK, func() answer {
			return g.send("mallory", "DELETE", nativePath(own, "n2-dry2")+"?dryRun=All", "", nil)
		})
		if p := g.do("mallory", "GET", rest(own, "n2-dry2"), nil).str("status", "phase"); p == "Cancelled" {
			t.Errorf("a dry-run delete cancelled the runnable")
		}
		g.refused("a dry run with another value", http.StatusUnprocessableEntity, func() answer {
			return g.send("mallory", "DELETE", nativePath(own, "n2-dry2")+"?dryRun=all", "", nil)
		})
		// The dry run of a create over a cancelled runnable of the name
		// answers what the create would: the name is still held.
		track(appr, "n2-again")
		g.nativeCreate("mallory", appr, "n2-again", "")
		g.send("mallory", "DELETE", nativePath(appr, "n2-again"), "", nil).want(t, http.StatusOK)
		g.refused("a dry-run re-create over the cancelled runnable", http.StatusConflict, func() answer {
			return g.send("mallory", "POST", nativePath(appr, "")+"?dryRun=All", ctJSON, nativeJob(t, appr, "n2-again", ""))
		})
	})

	// A refused re-create leaves the cancelled runnable it would have
	// replaced: nothing of a refused write is done.
	t.Run("RefusedRecreateKeepsTheRecord", func(t *testing.T) {
		g := f.under(t)
		track(appr, "n2-gone")
		g.nativeCreate("mallory", appr, "n2-gone", "")
		g.send("mallory", "DELETE", nativePath(appr, "n2-gone"), "", nil).want(t, http.StatusOK)
		privileged := []byte(strings.Replace(string(nativeJob(t, appr, "n2-gone", "")), `"containers":[{`, `"hostPID":true,"containers":[{"securityContext":{"privileged":true},`, 1))
		g.refused("a privileged Job over her cancelled runnable", http.StatusConflict, func() answer {
			return g.send("mallory", "POST", nativePath(appr, ""), ctJSON, privileged)
		})
		if a := g.do("mallory", "GET", rest(appr, "n2-gone"), nil); a.code != http.StatusOK {
			t.Errorf("HOLE: the refused re-create removed the cancelled runnable it was to replace: %d %s", a.code, a.raw)
		}
	})

	// Media types a web page sends without asking (through `purser
	// kubeconfig --proxy`, which adds the user's credential) write nothing.
	t.Run("ContentTypes", func(t *testing.T) {
		g := f.under(t)
		track(own, "n2-ct")
		g.nativeCreate("mallory", own, "n2-ct", "")
		for _, ct := range []string{"text/plain", "", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain; charset=application/json"} {
			g.refused("a create sent as "+ct, http.StatusUnsupportedMediaType, func() answer {
				return g.send("mallory", "POST", nativePath(own, ""), ct, nativeJob(t, own, "n2-page", ""))
			})
			g.refused("a PUT sent as "+ct, http.StatusUnsupportedMediaType, func() answer {
				return g.send("mallory", "PUT", nativePath(own, "n2-ct"), ct, nativeJob(t, own, "n2-ct", ""))
			})
			g.refused("a patch sent as "+ct, http.StatusUnsupportedMediaType, func() answer {
				return g.send("mallory", "PATCH", nativePath(own, "n2-ct"), ct, []byte(`{"spec":{"parallelism":3}}`))
			})
		}
	})

	// Bodies that cost more than they say: aliases, depth, size, copies.
	t.Run("Bombs", func(t *testing.T) {
		g := f.under(t)
		track(own, "n2-bomb")
		g.nativeCreate("mallory", own, "n2-bomb", "")
		bomb := strings.Replace(k8sAliasBomb("Job", "{}"), "apiVersion: authorization.k8s.io/v1\n", "apiVersion: batch/v1\nmetadata: {name: n2-alias}\n", 1)
		g.refusedWith("a YAML alias bomb as a Job", []int{http.StatusRequestEntityTooLarge, http.StatusBadRequest}, func() answer {
			return g.send("mallory", "POST", nativePath(own, ""), "application/yaml", []byte(bomb))
		})
		deep := `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"n2-deep"},"spec":{"x":` + strings.Repeat(`[`, 9000) + strings.Repeat(`]`, 9000) + `}}`
		g.refusedWith("a Job nested 9000 deep", []int{http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge}, func() answer {
			return g.send("mallory", "POST", nativePath(own, ""), ctJSON, []byte(deep))
		})
		g.refusedWith("a merge patch nested 20000 deep", []int{http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge}, func() answer {
			return g.send("mallory", "PATCH", nativePath(own, "n2-bomb"), ctMerge, []byte(`{"spec":{"x":`+strings.Repeat(`{"a":`, 20000)+`1`+strings.Repeat(`}`, 20000)+`}}`))
		})
		ops := []string{`{"op":"add","path":"/metadata/annotations","value":{"a":"` + strings.Repeat("x", 4096) + `"}}`,
			`{"op":"add","path":"/spec/x","value":[]}`}
		for i := range 900 {
			ops = append(ops, fmt.Sprintf(`{"op":"copy","from":"/metadata/annotations","path":"/spec/x/%d"}`, i))
		}
		g.refusedWith("a JSON patch of 900 copies", []int{http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity}, func() answer {
			return g.send("mallory", "PATCH", nativePath(own, "n2-bomb"), ctJSONP, []byte("["+strings.Join(ops, ",")+"]"))
		})
		g.refused("a JSON patch of 1001 operations", http.StatusRequestEntityTooLarge, func() answer {
			return g.send("mallory", "PATCH", nativePath(own, "n2-bomb"), ctJSONP, []byte("["+strings.TrimSuffix(strings.Repeat(`{"op":"test","path":"/kind","value":"Job"},`, 1001), ",")+"]"))
		})
		big := bytes.Replace(nativeJob(t, own, "n2-big", ""), []byte(`"spec":{`), []byte(`"spec":{"x":"`+strings.Repeat("x", 1<<20)+`",`), 1)
		g.refused("a Job over a MiB", http.StatusRequestEntityTooLarge, func() answer {
			return g.send("mallory", "POST", nativePath(own, ""), ctJSON, big)
		})
		// The server closes the connection of a body it would not read
		// whole; the client's pool may still hold it.
		http.DefaultClient.CloseIdleConnections()
	})

	// Kinds her policy may select but a runnable may not be, or that her
	// namespace denies: refused as the REST create of that runnable is.
	t.Run("KindsAPolicyCannotLaunder", func(t *testing.T) {
		g := f.under(t)
		kinds := []struct{ apiVersion, kind string }{{"v1", "Secret"}, {"rbac.authorization.k8s.io/v1", "RoleBinding"}}
		defer func() {
			for _, k := range kinds {
				g.do("mallory", "DELETE", "/api/v1/placementpolicies/"+own+"/n2-"+strings.ToLower(k.kind), nil)
			}
		}()
		for _, k := range kinds {
			p := g.yaml("mallory", "PUT", "/api/v1/placementpolicies/"+own+"/n2-"+strings.ToLower(k.kind), strings.Replace(
				placementPolicy("PlacementPolicy", own, "n2-"+strings.ToLower(k.kind), atLeastOnce),
				"[{apiVersion: batch/v1, kind: Job}]", "[{apiVersion: "+k.apiVersion+", kind: "+k.kind+"}]", 1))
			t.Logf("her policy selecting %s: %d", k.kind, p.code)
		}
		g.refused("a Secret through her policy", http.StatusUnprocessableEntity, func() answer {
			return g.send("mallory", "POST", "/k8s/api/v1/namespaces/"+own+"/secrets", ctJSON,
				[]byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"n2-secret"},"stringData":{"p":"hunter2"}}`))
		})
		// 404 where the inventory does not track the kind: only the kinds
		// it tracks are served under /k8s.
		g.refusedWith("a RoleBinding, denied in her namespace, through her policy", []int{http.StatusForbidden, http.StatusNotFound}, func() answer {
			return g.send("mallory", "POST", "/k8s/apis/rbac.authorization.k8s.io/v1/namespaces/"+own+"/rolebindings", ctJSON,
				[]byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"n2-rb"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"admin"},"subjects":[{"kind":"User","name":"mallory","apiGroup":"rbac.authorization.k8s.io"}]}`))
		})
		g.refused("a namespaced placement policy at the farm's path of /k8s", http.StatusForbidden, func() answer {
			return g.send("mallory", "PUT", k8s("", "placementpolicies", "n2-grab"), "application/yaml",
				[]byte(placementPolicy("PlacementPolicy", "", "n2-grab", atLeastOnce)))
		})
	})

	// Purser's own labels and annotations in her object do not make it
	// another runnable's, nor a deployable's: the copy on the cluster
	// carries her runnable's marks and no other.
	t.Run("PurserLabelsInTheObject", func(t *testing.T) {
		g := f.under(t)
		victims := g.do("victor", "GET", "/api/v1/runnables/"+f.victim+"/nightly", nil)
		victimUID := victims.str("metadata", "uid")
		if victimUID == "" {
			victimUID = "00000000-0000-0000-0000-000000000000"
		}
		track(own, "n2-forged")
		a := g.send("mallory", "POST", nativePath(own, ""), ctJSON, nativeJobMeta(t, own, "n2-forged",
			map[string]string{"purser.io/runnable-uid": victimUID, "purser.io/runnable-namespace": f.victim, "purser.io/deployable": "forged"},
			map[string]string{"purser.io/runnable": f.victim + "/nightly"}))
		if a.code != http.StatusCreated {
			if a.code != http.StatusUnprocessableEntity {
				t.Errorf("a Job with purser's labels: %d %s", a.code, a.raw)
			}
			return
		}
		mine := g.do("mallory", "GET", rest(own, "n2-forged"), nil).str("metadata", "uid")
		kube, err := f.cluster.Client()
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "her Job on the cluster", func() error {
			j, err := kube.BatchV1().Jobs(own).Get(context.Background(), "n2-forged", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if j.Labels["purser.io/runnable-uid"] != mine || j.Labels["purser.io/runnable-namespace"] != own || j.Annotations["purser.io/runnable"] != own+"/n2-forged" {
				t.Errorf("her Job on the cluster claims another runnable: labels %v, annotations %v", j.Labels, j.Annotations)
			}
			// The syncer's informers, stray removal and claims key on
			// this label: "only objects carrying it are ever updated or
			// deleted" by a deployable's sync.
			if v, ok := j.Labels["purser.io/deployable"]; ok {
				t.Errorf("HOLE: her runnable's Job on the cluster carries the deployables' ownership label purser.io/deployable=%s, which she wrote", v)
			}
			return nil
		})
	})

	// Every accepted write is audited with her as its actor.
	t.Run("Audited", func(t *testing.T) {
		g := f.under(t)
		track(own, "n2-audit")
		before := g.auditRows("mallory", own, "n2-audit")
		g.nativeCreate("mallory", own, "n2-audit", "")
		created := g.auditRows("mallory", own, "n2-audit")
		if created <= before {
			t.Errorf("a native create wrote no audit entry of mallory (%d -> %d)", before, created)
		}
		g.send("mallory", "DELETE", nativePath(own, "n2-audit"), "", nil).want(t, http.StatusOK)
		if deleted := g.auditRows("mallory", own, "n2-audit"); deleted <= created {
			t.Errorf("a native delete wrote no audit entry of mallory (%d -> %d)", created, deleted)
		}
		for _, who := range []string{"admin", "carol", "victor"} {
			if n := g.auditRows(who, own, "n2-audit"); n != 0 {
				t.Errorf("her native writes were audited as %s's (%d entries)", who, n)
			}
		}
	})
}
