package tenancy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// nativeJob is a Job as kubectl sends it to /k8s, JSON, in ns.
func nativeJob(t *testing.T, ns, name, extra string) []byte {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(fmt.Sprintf("apiVersion: batch/v1\nkind: Job\nmetadata: {name: %s, namespace: %s}\n%sspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: main, image: busybox}]\n",
		name, ns, extra)))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// nativePath is where a Job of ns is written through /k8s.
func nativePath(ns, name string) string {
	p := "/k8s/apis/batch/v1/namespaces/" + ns + "/jobs"
	if name != "" {
		p += "/" + name
	}
	return p
}

func placementPolicy(kind, ns, name, runnable string) string {
	md := "{name: " + name + "}"
	if ns != "" {
		md = "{name: " + name + ", namespace: " + ns + "}"
	}
	return fmt.Sprintf("apiVersion: purser.io/v1alpha1\nkind: %s\nmetadata: %s\nspec:\n  resourceSelectors: [{apiVersion: batch/v1, kind: Job}]\n  runnable:\n%s",
		kind, md, indentBy(runnable, "    "))
}

// testNativeWrites: native objects written to /k8s become runnables only
// as their writer could create those runnables through the REST API.
// Mallory writes into the victim's namespace (with the farm's policy
// selecting it, too), writes policies she may not, hides what the
// runnable would do in her own policy (a priority class of the victim's,
// a privileged pod), names one kind on the path and another in the body,
// takes the name of a runnable of another kind, patches strategically,
// writes through one cluster's /k8s, and floods her namespace with
// policies; each is refused and changes nothing.
func testNativeWrites(t *testing.T, f *farm) {
	const ct = "application/json"
	own := f.own
	eventually(t, "Jobs served through /k8s", func() error {
		if a := f.do("mallory", "GET", nativePath(own, ""), nil); a.code != http.StatusOK {
			return fmt.Errorf("%d %s", a.code, a.raw)
		}
		return nil
	})
	f.yaml("admin", "PUT", "/api/v1/clusterplacementpolicies/jobs-everywhere",
		placementPolicy("ClusterPlacementPolicy", "", "jobs-everywhere", "failover: {consistency: AtLeastOne}\n")).want(t, http.StatusCreated)
	defer f.do("admin", "DELETE", "/api/v1/clusterplacementpolicies/jobs-everywhere", nil)

	f.refused("a Job into the victim's namespace, which the farm's policy selects", http.StatusForbidden, func() answer {
		return f.send("mallory", "POST", nativePath(f.victim, ""), ct, nativeJob(t, f.victim, "native-mine", ""))
	})
	f.refused("a policy in the victim's namespace", http.StatusForbidden, func() answer {
		return f.yaml("mallory", "PUT", "/api/v1/placementpolicies/"+f.victim+"/grab", placementPolicy("PlacementPolicy", f.victim, "grab", "failover: {consistency: AtLeastOne}\n"))
	})
	f.refused("a policy in the victim's namespace through /k8s", http.StatusForbidden, func() answer {
		return f.send("mallory", "POST", k8s(f.victim, "placementpolicies", ""), "application/yaml",
			[]byte(placementPolicy("PlacementPolicy", f.victim, "grab", "failover: {consistency: AtLeastOne}\n")))
	})
	f.refused("a policy of the farm", http.StatusForbidden, func() answer {
		return f.yaml("mallory", "PUT", "/api/v1/clusterplacementpolicies/grab", placementPolicy("ClusterPlacementPolicy", "", "grab", "failover: {consistency: AtLeastOne}\n"))
	})

	// Her own policy asks for what she may not have: the runnable is
	// refused as her REST create of it would be.
	f.yaml("mallory", "PUT", "/api/v1/placementpolicies/"+own+"/critical",
		placementPolicy("PlacementPolicy", own, "critical", "priority: critical\n")).want(t, http.StatusCreated)
	viaREST := f.refused("the runnable of her policy, through the REST API", http.StatusUnprocessableEntity, func() answer {
		return f.yaml("mallory", "POST", "/api/v1/runnables", fmt.Sprintf(
			"apiVersion: purser.io/v1alpha1\nkind: Runnable\nmetadata: {name: native-critical, namespace: %s}\nspec:\n  priority: critical\n  template:\n%s", own, indent(job)))
	})
	viaK8s := f.refused("a Job her policy gives the victim's priority class", http.StatusUnprocessableEntity, func() answer {
		return f.send("mallory", "POST", nativePath(own, ""), ct, nativeJob(t, own, "native-critical", ""))
	})
	if m, _ := viaK8s.body["message"].(string); !strings.Contains(m, fmt.Sprint(viaREST.body["message"])) {
		t.Errorf("the refusal through /k8s %q does not say what the REST API's says, %q", m, viaREST.body["message"])
	}
	f.do("mallory", "DELETE", "/api/v1/placementpolicies/"+own+"/critical", nil).want(t, http.StatusOK)

	f.yaml("mallory", "PUT", "/api/v1/placementpolicies/"+own+"/jobs",
		placementPolicy("PlacementPolicy", own, "jobs", "failover: {consistency: AtLeastOne}\n")).want(t, http.StatusCreated)
	privileged := []byte(strings.Replace(string(nativeJob(t, own, "native-root", "")), `"containers":[{`, `"hostPID":true,"containers":[{"securityContext":{"privileged":true},`, 1))
	f.refused("a privileged pod in a Job", http.StatusUnprocessableEntity, func() answer {
		return f.send("mallory", "POST", nativePath(own, ""), ct, privileged)
	})
	f.refused("a Deployment's body on the Jobs' path", http.StatusUnprocessableEntity, func() answer {
		return f.send("mallory", "POST", nativePath(own, ""), ct,
			[]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"native-dep"},"spec":{}}`))
	})
	f.refused("a body naming the victim's namespace on her own path", http.StatusBadRequest, func() answer {
		return f.send("mallory", "POST", nativePath(own, ""), ct, nativeJob(t, f.victim, "native-x", ""))
	})
	f.refused("a strategic merge patch of a Job nothing holds", http.StatusMethodNotAllowed, func() answer {
		return f.send("mallory", "PATCH", nativePath(own, "native-x"), "application/strategic-merge-patch+json", []byte(`{"spec":{}}`))
	})
	f.refused("a write through one cluster's /k8s", http.StatusMethodNotAllowed, func() answer {
		return f.send("mallory", "POST", "/k8s/clusters/dc1"+nativePath(own, "")[len("/k8s"):], ct, nativeJob(t, own, "native-x", ""))
	})
	f.refused("a dry run", http.StatusCreated, func() answer {
		return f.send("mallory", "POST", nativePath(own, "")+"?dryRun=All", ct, nativeJob(t, own, "native-dry", ""))
	})
	// A runnable of another kind holds the name: not hers to take over.
	f.yaml("mallory", "POST", "/api/v1/runnables", runnable(own, "native-taken", configMap("native-taken", "v"))).want(t, http.StatusAccepted)
	defer f.do("mallory", "DELETE", "/api/v1/runnables/"+own+"/native-taken", nil)
	f.refused("a Job named as her ConfigMap's runnable", http.StatusConflict, func() answer {
		return f.send("mallory", "POST", nativePath(own, ""), ct, nativeJob(t, own, "native-taken", ""))
	})
	f.refused("a patch, as a Job, of her ConfigMap's runnable", http.StatusMethodNotAllowed, func() answer {
		return f.send("mallory", "PATCH", nativePath(own, "native-taken"), "application/merge-patch+json", []byte(`{"spec":{"suspend":true}}`))
	})

	// Policies are bounded per namespace.
	for i := range 99 {
		f.yaml("mallory", "PUT", fmt.Sprintf("/api/v1/placementpolicies/%s/flood-%d", own, i),
			placementPolicy("PlacementPolicy", own, fmt.Sprintf("flood-%d", i), "failover: {consistency: AtLeastOne}\n")).want(t, http.StatusCreated)
	}
	f.refused("a hundred and first policy", http.StatusUnprocessableEntity, func() answer {
		return f.yaml("mallory", "PUT", "/api/v1/placementpolicies/"+own+"/flood-x",
			placementPolicy("PlacementPolicy", own, "flood-x", "failover: {consistency: AtLeastOne}\n"))
	})
	for i := range 99 {
		f.do("mallory", "DELETE", fmt.Sprintf("/api/v1/placementpolicies/%s/flood-%d", own, i), nil).want(t, http.StatusOK)
	}
	f.do("mallory", "DELETE", "/api/v1/placementpolicies/"+own+"/jobs", nil).want(t, http.StatusOK)
}
