package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// nodeRow is a Node record as the ingester writes it from the agent's
// trimmed object (no managedFields, no image list): allocatable quantities
// as the kubelet reports them, spec.unschedulable when cordoned, and the
// labels, annotations, conditions and addresses that make up the rest of
// a real node's few kilobytes.
func nodeRow(cluster, name string, cpu, memory, pods string, cordoned bool) InventoryRow {
	spec := map[string]any{"podCIDR": "10.244.1.0/24", "podCIDRs": []string{"10.244.1.0/24"},
		"providerID": "gce://project/europe-west1-b/" + name}
	if cordoned {
		spec["unschedulable"] = true
		spec["taints"] = []any{map[string]any{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}}
	}
	allocatable := map[string]any{"ephemeral-storage": "95491281146", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
	for k, v := range map[string]string{"cpu": cpu, "memory": memory, "pods": pods} {
		if v != "" {
			allocatable[k] = v
		}
	}
	condition := func(typ, status, reason, message string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": message,
			"lastHeartbeatTime": "2026-11-29T12:00:00Z", "lastTransitionTime": "2026-11-01T08:00:00Z"}
	}
	obj := map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{
			"name": name, "uid": cluster + "-" + name, "resourceVersion": "100", "creationTimestamp": "2026-11-01T08:00:00Z",
			"labels": map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"node.kubernetes.io/instance-type": "n2-standard-16", "topology.kubernetes.io/region": "europe-west1",
				"topology.kubernetes.io/zone": "europe-west1-b", "cloud.google.com/gke-nodepool": "pool-1",
			},
			"annotations": map[string]string{
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				"csi.volume.kubernetes.io/nodeid":                        `{"pd.csi.storage.gke.io":"projects/project/zones/europe-west1-b/instances/` + name + `"}`,
			},
		},
		"spec": spec,
		"status": map[string]any{
			"capacity":    map[string]any{"cpu": "16", "memory": "65851340Ki", "pods": "110", "ephemeral-storage": "101203084Ki"},
			"allocatable": allocatable,
			"conditions": []any{
				condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
			},
			"addresses": []any{
				map[string]any{"type": "InternalIP", "address": "10.132.0.17"},
				map[string]any{"type": "Hostname", "address": name},
			},
			"daemonEndpoints": map[string]any{"kubeletEndpoint": map[string]any{"Port": 10250}},
			"nodeInfo": map[string]any{"kubeletVersion": "v1.33.1", "kubeProxyVersion": "v1.33.1",
				"osImage": "Ubuntu 24.04 LTS", "kernelVersion": "6.8.0-1015-gcp", "containerRuntimeVersion": "containerd://2.0.5",
				"machineID": "4c4c4544004d3610804cb4c04f4d3232", "systemUUID": "4c4c4544-004d-3610-804c-b4c04f4d3232",
				"bootID": "1f0b7c8e-3f0e-4a53-9d5e-2f1d1c1e0a7b", "operatingSystem": "linux", "architecture": "amd64"},
		},
	}
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return InventoryRow{Cluster: cluster, APIVersion: "v1", Kind: "Node", Name: name, UID: cluster + "-" + name,
		ResourceVersion: "100", Labels: map[string]string{"kubernetes.io/hostname": name}, Health: "Healthy",
		ObservedAt: time.Now(), Object: b}
}

func TestClusterCapacity(t *testing.T) {
	for _, eng := range engines(t) {
		t.Run(eng.name, func(t *testing.T) {
			t.Parallel()
			s := eng.open(t)
			var rows []InventoryRow
			// a: two identical nodes, one of another size, one cordoned.
			for i := range 2 {
				rows = append(rows, nodeRow("a", fmt.Sprintf("pool1-%d", i), "15890m", "61847500Ki", "110", false))
			}
			rows = append(rows,
				nodeRow("a", "pool2-0", "4", "16Gi", "58", false),
				nodeRow("a", "pool1-cordoned", "15890m", "61847500Ki", "110", true),
				// b: every node cordoned; known, but nothing to place on.
				nodeRow("b", "n0", "8", "32Gi", "110", true))
			// c: a node without its object (too large to publish) and one
			// whose memory does not parse: counted, adding what is known.
			noObject := nodeRow("c", "n0", "8", "32Gi", "110", false)
			noObject.Object = nil
			rows = append(rows, noObject, nodeRow("c", "n1", "500m", "lots", "10", false))
			// Not nodes: a ConfigMap that looks like one, a Node of
			// another API group.
			cm := nodeRow("a", "cm", "1000", "1Ti", "1000", false)
			cm.Kind, cm.Namespace = "ConfigMap", "default"
			other := nodeRow("a", "other", "1000", "1Ti", "1000", false)
			other.APIVersion = "example.com/v1"
			rows = append(rows, cm, other)
			upsert(t, s, rows...)

			var got map[string]Capacity
			mustRead(t, s, func(tx *Tx) (err error) { got, err = tx.Clusters().Capacity(t.Context()); return err })
			const ki, gi = 1024, 1024 * 1024 * 1024
			want := map[string]Capacity{
				"a": {MilliCPU: 2*15890 + 4000, Memory: 2*61847500*ki + 16*gi, Pods: 2*110 + 58, Nodes: 3, Unschedulable: 1},
				"b": {Unschedulable: 1},
				"c": {MilliCPU: 500, Pods: 10, Nodes: 2},
			}
			if len(got) != len(want) {
				t.Errorf("clusters: got %v, want %v", got, want)
			}
			for name, w := range want {
				if got[name] != w {
					t.Errorf("cluster %s: got %+v, want %+v", name, got[name], w)
				}
			}

			// Cordoning and uncordoning are updates of the same record.
			a := nodeRow("a", "pool1-cordoned", "15890m", "61847500Ki", "110", false)
			a.ResourceVersion = "101"
			upsert(t, s, a)
			mustRead(t, s, func(tx *Tx) (err error) { got, err = tx.Clusters().Capacity(t.Context()); return err })
			if c := got["a"]; c.Nodes != 4 || c.Unschedulable != 0 || c.MilliCPU != 3*15890+4000 {
				t.Errorf("after uncordon: %+v", c)
			}
		})
	}
}

// BenchmarkClusterCapacity reads the capacity of 100 clusters of 200
// nodes each (records of real size) among 100,000 other inventory
// records: the read behind every placement.
func BenchmarkClusterCapacity(b *testing.B) {
	const clusters, nodes, others = 100, 200, 100_000
	for _, eng := range engines(b) {
		b.Run(eng.name, func(b *testing.B) {
			s := eng.open(b)
			ctx := b.Context()
			var rows []InventoryRow
			for c := range clusters {
				cluster := fmt.Sprintf("dc%d-%02d", c%4, c)
				for n := range nodes {
					// Three pools per cluster; memory differs a little
					// per node within a pool, as kernels report it.
					pool := n % 3
					mem := fmt.Sprintf("%dKi", 61847500+pool*1000+n%5)
					rows = append(rows, nodeRow(cluster, fmt.Sprintf("pool%d-%03d", pool, n),
						[]string{"15890m", "7910m", "31850m"}[pool], mem, "110", n%50 == 0))
				}
			}
			for i := range others {
				r := invRow(fmt.Sprintf("dc%d-%02d", i%4, i%clusters), fmt.Sprintf("cm-%06d", i), "10")
				r.Object = []byte(`{"data":{"k":"` + strings.Repeat("v", 200) + `"}}`)
				rows = append(rows, r)
			}
			for start := 0; start < len(rows); start += 5000 {
				part := rows[start:min(start+5000, len(rows))]
				if err := s.Tx(ctx, func(tx *Tx) error { _, err := tx.Inventory().Upsert(ctx, part); return err }); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				var got map[string]Capacity
				if err := s.Read(ctx, func(tx *Tx) (err error) { got, err = tx.Clusters().Capacity(ctx); return err }); err != nil {
					b.Fatal(err)
				}
				if len(got) != clusters {
					b.Fatalf("%d clusters", len(got))
				}
			}
		})
	}
}
