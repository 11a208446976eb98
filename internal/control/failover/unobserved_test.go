package failover_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/purser-io/purser/api/v1alpha1"
)

// unobservedRunnable is a FlinkDeployment with application failover and
// nothing to carry: its first attempt has no state to restore.
const unobservedRunnable = `
apiVersion: purser.io/v1alpha1
kind: Runnable
metadata: {name: untaken}
spec:
  template:
    apiVersion: flink.apache.org/v1beta1
    kind: FlinkDeployment
    spec:
      image: flink:1.20
      job: {jarURI: "local:///opt/flink/examples/streaming/WordCount.jar", parallelism: 1, upgradeMode: stateless}
  placement:
    clusterAffinity: {clusterNames: [a, b]}
  failover:
    consistency: AtLeastOne
    application:
      tolerationSeconds: 3
      initialTolerationSeconds: 4
      purgeMode: Directly
`

// A FlinkDeployment on a cluster whose Flink operator is gone is never
// called Unhealthy without evidence: nothing has written its status, so
// its health is Unknown and its cluster's inventory says phase
// Unobserved, "not yet observed by the Flink operator". Yet the cluster is
// at fault, so the runnable moves once its initial toleration is over,
// and the attempt it leaves says why; on a cluster with an operator it
// runs Healthy.
func TestUnobservedDeploymentMoves(t *testing.T) {
	cs := env.Clusters(t)
	f := newFarm(t, sqliteDSN(t), []cluster{{name: "a", sandbox: cs[0], noOperator: true}, {name: "b", sandbox: cs[1]}})
	f.cordon("b", true) // it starts on a
	f.submit(unobservedRunnable)
	r := f.waitFor("untaken", "on a, Unknown, its toleration counting", func(r *v1alpha1.Runnable) bool {
		return r.Status.Cluster == "a" && r.Status.Health == v1alpha1.HealthUnknown && r.Status.UnhealthySince != nil
	})
	if r.Status.Phase != v1alpha1.PhaseSubmitted {
		t.Errorf("phase %s on a, want Submitted", r.Status.Phase)
	}
	var items struct {
		Items []struct{ Health, Phase string } `json:"items"`
	}
	f.do(http.MethodGet, "/api/v1/inventory?cluster=a&kind=FlinkDeployment&namespace="+f.ns, nil, &items)
	if len(items.Items) != 1 || items.Items[0].Phase != v1alpha1.ObjectUnobserved || items.Items[0].Health != string(v1alpha1.HealthUnknown) {
		t.Errorf("inventory of a: %+v; want one FlinkDeployment, Unknown, phase %s", items.Items, v1alpha1.ObjectUnobserved)
	}
	f.cordon("b", false)

	unhealthyOnA := false
	r = f.waitFor("untaken", "Running and Healthy on b", func(r *v1alpha1.Runnable) bool {
		if r.Status.Cluster == "a" && r.Status.Health == v1alpha1.HealthUnhealthy {
			unhealthyOnA = true
		}
		return r.Status.Cluster == "b" && r.Status.Phase == v1alpha1.PhaseRunning && r.Status.Health == v1alpha1.HealthHealthy
	})
	if unhealthyOnA {
		t.Error("the attempt on a was called Unhealthy, with nothing observed of it")
	}
	if len(r.Status.Attempts) != 2 {
		t.Fatalf("%d attempts, want 2: %+v", len(r.Status.Attempts), r.Status.Attempts)
	}
	first := r.Status.Attempts[0]
	if first.Cluster != "a" || !strings.Contains(first.Message, "not taken up by its controller on a (no status written)") ||
		!strings.Contains(first.Message, "initialTolerationSeconds") {
		t.Errorf("attempt 1 ended on %s: %q; want a message saying its controller never took it up", first.Cluster, first.Message)
	}
}
