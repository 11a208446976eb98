package scale_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/purser-io/purser/internal/hub/stream"
)

// farm is the load generator's model of the member clusters: what each
// agent's cache would hold, so that the events it publishes and the
// snapshots it takes agree as a real agent's do. It holds no objects, only
// each one's version and generation; the objects are rendered when they
// are published.
type farm struct {
	clusters []*memberCluster
	objects  int // per cluster
}

// The shape of the farm: every cluster has namespacesPerCluster of the
// teamNamespaces team namespaces, so that a namespace name lives on a few
// clusters (teamNamespaces*... see namespaceOf), and appsPerNamespace apps
// in each, so that a selector app=<one app> matches a few hundred objects
// of the whole farm.
const (
	teamNamespaces       = 200
	namespacesPerCluster = 8
	appsPerNamespace     = 10
)

// memberCluster is one cluster's state, changed under its lock by the
// churn and read under it by a snapshot.
type memberCluster struct {
	name  string
	index int

	mu sync.Mutex
	// rv is the cluster's etcd revision: every change takes the next one.
	rv      uint64
	objects []objectState
	// deleted are the indexes of deleted objects, oldest first, which the
	// churn creates again (a Job run again under its name).
	deleted []int
}

// objectState is one object slot: its current resourceVersion and how many
// times it was created (its uid changes with each).
type objectState struct {
	rv      uint64
	gen     uint32
	deleted bool
}

func newFarm(clusters, objects int) *farm {
	f := &farm{objects: objects}
	for c := range clusters {
		mc := &memberCluster{name: fmt.Sprintf("member-%03d", c), index: c, rv: 1000, objects: make([]objectState, objects)}
		for i := range mc.objects {
			mc.rv++
			mc.objects[i].rv = mc.rv
		}
		f.clusters = append(f.clusters, mc)
	}
	return f
}

// namespaceOf is the namespace of object i of cluster c: cluster c holds
// team namespaces 2c .. 2c+7 (mod 200), so each name is on four of 100
// clusters.
func namespaceOf(c, i int) string {
	return fmt.Sprintf("team-%03d", (c*2+i%namespacesPerCluster)%teamNamespaces)
}

// appOf is the app label of object i of cluster c.
func appOf(c, i int) string {
	return fmt.Sprintf("%s-app-%d", namespaceOf(c, i), (i/namespacesPerCluster)%appsPerNamespace)
}

// The kind mix, by i % 10: four ConfigMaps, three Jobs, two Workflows,
// one FlinkDeployment.
type kindInfo struct{ apiVersion, kind, suffix string }

var kindMix = [10]kindInfo{
	{"v1", "ConfigMap", "config"}, {"v1", "ConfigMap", "config"}, {"v1", "ConfigMap", "config"}, {"v1", "ConfigMap", "config"},
	{"batch/v1", "Job", "job"}, {"batch/v1", "Job", "job"}, {"batch/v1", "Job", "job"},
	{"argoproj.io/v1alpha1", "Workflow", "wf"}, {"argoproj.io/v1alpha1", "Workflow", "wf"},
	{"flink.apache.org/v1beta1", "FlinkDeployment", "flink"},
}

func kindOf(i int) kindInfo { return kindMix[i%len(kindMix)] }

func uidOf(c, i int, gen uint32) string {
	return fmt.Sprintf("%08x-%04x-4000-8000-%012x", c, gen&0xffff, i)
}

// event renders object i of cluster c at its state as the agent would
// publish it; the caller holds the cluster's lock or owns the farm.
func (f *farm) event(c, i int, typ string, now time.Time) stream.Event {
	mc := f.clusters[c]
	st := mc.objects[i]
	k := kindOf(i)
	ns, app := namespaceOf(c, i), appOf(c, i)
	name := fmt.Sprintf("%s-%s-%05d", app, k.suffix, i)
	uid := uidOf(c, i, st.gen)
	rv := fmt.Sprint(st.rv)
	labels := map[string]string{
		"app": app, "team": ns, "env": [3]string{"prod", "staging", "dev"}[c%3],
		"app.kubernetes.io/part-of": ns + "-platform",
	}
	ev := stream.Event{Cluster: mc.name, APIVersion: k.apiVersion, Kind: k.kind, Namespace: ns, Name: name,
		UID: uid, ResourceVersion: rv, Type: typ, Labels: labels, Time: now}
	obj := map[string]any{
		"apiVersion": k.apiVersion, "kind": k.kind,
		"metadata": map[string]any{
			"name": name, "namespace": ns, "uid": uid, "resourceVersion": rv, "generation": st.gen + 1,
			"creationTimestamp": now.Add(-time.Duration(i) * time.Second).UTC().Format(time.RFC3339),
			"labels":            labels,
		},
	}
	// The state varies with the version, so that a change is a change.
	step := int(st.rv % 7)
	switch k.kind {
	case "ConfigMap":
		obj["data"] = configData(i, step)
	case "Job":
		jobObject(obj, name, app, i, step, now)
	case "Workflow":
		workflowObject(obj, name, app, i, step, now)
	case "FlinkDeployment":
		flinkObject(obj, name, app, i, step, now)
	}
	ev.Object, _ = json.Marshal(obj)
	return ev
}

// configData is a ConfigMap's data, 0.3 to 2.5 KB of YAML depending on
// the object, as application configs are.
func configData(i, step int) map[string]string {
	pad := 300 + (i*7919)%2200
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n  port: %d\n  timeout: 30s\n  revision: %d\nfeatures:\n", 8000+i%1000, step)
	for b.Len() < pad {
		fmt.Fprintf(&b, "  - feature-%d: enabled\n", b.Len()%97)
	}
	return map[string]string{"LOG_LEVEL": "info", "REGION": fmt.Sprintf("eu-west-%d", i%3+1), "config.yaml": b.String()}
}

func container(app string, i int) map[string]any {
	return map[string]any{
		"name": "main", "image": fmt.Sprintf("registry.example.com/%s:1.%d.%d", app, i%7, i%13),
		"args": []string{"--config=/etc/app/config.yaml", "--log-format=json"},
		"resources": map[string]any{
			"requests": map[string]string{"cpu": "500m", "memory": "1Gi"},
			"limits":   map[string]string{"cpu": "2", "memory": "2Gi"},
		},
		"volumeMounts": []map[string]string{{"name": "config", "mountPath": "/etc/app"}},
	}
}

// jobObject: a Job running, then complete, as its status goes.
func jobObject(obj map[string]any, name, app string, i, step int, now time.Time) {
	obj["spec"] = map[string]any{
		"backoffLimit": 3, "completions": 1, "parallelism": 1, "ttlSecondsAfterFinished": 86400,
		"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]string{"app": app, "job-name": name}},
			"spec": map[string]any{"restartPolicy": "Never", "containers": []any{container(app, i)},
				"volumes": []map[string]any{{"name": "config", "configMap": map[string]string{"name": app + "-config"}}}},
		},
	}
	start := now.Add(-time.Duration(step+1) * time.Minute).UTC().Format(time.RFC3339)
	status := map[string]any{"startTime": start, "active": 1, "ready": 1, "uncountedTerminatedPods": map[string]any{}}
	if step >= 4 {
		status = map[string]any{"startTime": start, "succeeded": 1, "completionTime": now.UTC().Format(time.RFC3339),
			"conditions": []map[string]string{
				{"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now.UTC().Format(time.RFC3339)},
				{"type": "Complete", "status": "True", "lastTransitionTime": now.UTC().Format(time.RFC3339)},
			}}
	}
	obj["status"] = status
}

// workflowObject: an Argo Workflow of three steps, its nodes' status
// growing as it runs.
func workflowObject(obj map[string]any, name, app string, i, step int, now time.Time) {
	obj["spec"] = map[string]any{
		"entrypoint": "main", "serviceAccountName": app,
		"arguments": map[string]any{"parameters": []map[string]string{{"name": "date", "value": "2026-12-06"}}},
		"templates": []any{
			map[string]any{"name": "main", "steps": [][]map[string]string{{{"name": "extract", "template": "run"}}, {{"name": "load", "template": "run"}}}},
			map[string]any{"name": "run", "container": container(app, i)},
		},
	}
	phase := []string{"Pending", "Running", "Running", "Running", "Succeeded", "Succeeded", "Failed"}[step]
	nodes := map[string]any{}
	for n := range min(step+1, 3) {
		id := fmt.Sprintf("%s-%d", name, 1000+n)
		nodes[id] = map[string]any{"id": id, "name": fmt.Sprintf("%s[%d]", name, n), "type": "Pod", "phase": phase,
			"startedAt": now.UTC().Format(time.RFC3339), "templateName": "run"}
	}
	obj["status"] = map[string]any{"phase": phase, "startedAt": now.Add(-time.Minute).UTC().Format(time.RFC3339),
		"progress": fmt.Sprintf("%d/3", min(step, 3)), "nodes": nodes}
}

// flinkObject: a FlinkDeployment running a job, with the operator's
// status (its last reconciled spec, a JSON string, makes these the
// largest).
func flinkObject(obj map[string]any, name, app string, i, step int, now time.Time) {
	spec := map[string]any{
		"image": fmt.Sprintf("registry.example.com/%s-flink:1.%d", app, i%5), "flinkVersion": "v1_19",
		"serviceAccount": "flink",
		"flinkConfiguration": map[string]string{"taskmanager.numberOfTaskSlots": "2", "state.checkpoints.dir": "s3://checkpoints/" + name,
			"state.savepoints.dir": "s3://savepoints/" + name, "execution.checkpointing.interval": "60s"},
		"jobManager":  map[string]any{"resource": map[string]any{"memory": "2048m", "cpu": 1}},
		"taskManager": map[string]any{"resource": map[string]any{"memory": "4096m", "cpu": 2}},
		"job":         map[string]any{"jarURI": "local:///opt/flink/usrlib/" + app + ".jar", "parallelism": 4, "upgradeMode": "savepoint", "state": "running"},
	}
	obj["spec"] = spec
	last, _ := json.Marshal(map[string]any{"spec": spec, "resource_metadata": map[string]any{"apiVersion": "flink.apache.org/v1beta1", "firstDeployment": false}})
	state := []string{"CREATED", "RUNNING", "RUNNING", "RUNNING", "RUNNING", "RESTARTING", "RUNNING"}[step]
	obj["status"] = map[string]any{
		"jobStatus": map[string]any{"jobName": name, "jobId": fmt.Sprintf("%032x", i), "state": state,
			"startTime": fmt.Sprint(now.Add(-time.Hour).UnixMilli()), "updateTime": fmt.Sprint(now.UnixMilli()),
			"checkpointInfo": map[string]any{"lastPeriodicCheckpointTimestamp": now.UnixMilli()}},
		"lifecycleState": "STABLE", "jobManagerDeploymentStatus": "READY",
		"reconciliationStatus": map[string]any{"reconciliationTimestamp": now.UnixMilli(), "state": "DEPLOYED",
			"lastReconciledSpec": string(last), "lastStableSpec": string(last)},
		"clusterInfo": map[string]string{"flink-version": "1.19.1", "total-cpu": "9.0", "total-memory": "19327352832"},
	}
}

// change is one event of the churn, chosen and applied to the model
// under the cluster's lock: a tenth deletions, a tenth creations of what
// was deleted earliest, the rest status changes.
func (f *farm) change(rng *rand.Rand, now time.Time) stream.Event {
	c := rng.IntN(len(f.clusters))
	mc := f.clusters[c]
	mc.mu.Lock()
	defer mc.mu.Unlock()
	roll := rng.IntN(10)
	if roll == 0 && len(mc.deleted) > 0 {
		i := mc.deleted[0]
		mc.deleted = mc.deleted[1:]
		mc.rv++
		mc.objects[i] = objectState{rv: mc.rv, gen: mc.objects[i].gen + 1}
		return f.event(c, i, stream.EventAdded, now)
	}
	i := f.liveObject(rng, mc)
	if roll == 1 {
		// A deletion carries the object's last state at a new revision,
		// as the watch's DELETED does.
		mc.rv++
		mc.objects[i].rv, mc.objects[i].deleted = mc.rv, true
		mc.deleted = append(mc.deleted, i)
		return f.event(c, i, stream.EventDeleted, now)
	}
	mc.rv++
	mc.objects[i].rv = mc.rv
	return f.event(c, i, stream.EventModified, now)
}

// liveObject picks an object not deleted; the farm holds few deleted
// objects, so a couple of draws suffice.
func (f *farm) liveObject(rng *rand.Rand, mc *memberCluster) int {
	for {
		if i := rng.IntN(len(mc.objects)); !mc.objects[i].deleted {
			return i
		}
	}
}

// snapshot lists cluster c as its agent would, after losing the DELETED
// events of `lost` objects: those are deleted in the model without an
// event, so that the snapshot must remove their records (zombies). It
// returns the chunks and the uids the snapshot must remove.
func (f *farm) snapshot(c, lost int, rng *rand.Rand, takenAt time.Time) ([]stream.SnapshotChunk, []string) {
	mc := f.clusters[c]
	mc.mu.Lock()
	defer mc.mu.Unlock()
	var zombies []string
	for range lost {
		i := f.liveObject(rng, mc)
		zombies = append(zombies, uidOf(c, i, mc.objects[i].gen))
		mc.rv++
		mc.objects[i].rv, mc.objects[i].deleted = mc.rv, true
		mc.deleted = append(mc.deleted, i)
	}
	lists := map[string]*stream.KindList{}
	var order []string
	for i, st := range mc.objects {
		if st.deleted {
			continue
		}
		k := kindOf(i)
		l := lists[k.kind]
		if l == nil {
			l = &stream.KindList{APIVersion: k.apiVersion, Kind: k.kind, ListResourceVersion: fmt.Sprint(mc.rv)}
			lists[k.kind] = l
			order = append(order, k.kind)
		}
		l.Items = append(l.Items, [2]string{uidOf(c, i, st.gen), fmt.Sprint(st.rv)})
	}
	var all []stream.KindList
	for _, k := range order {
		all = append(all, *lists[k])
	}
	id := fmt.Sprintf("%s-%d", mc.name, takenAt.UnixNano())
	return stream.ChunkSnapshot(mc.name, id, takenAt, all), zombies
}
