package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Capacity is what the schedulable nodes of one member cluster can
// allocate, summed over the cluster's Node records in the inventory.
type Capacity struct {
	// MilliCPU is allocatable CPU in millicores, Memory allocatable memory
	// in bytes, Pods the number of pods the nodes admit.
	MilliCPU, Memory, Pods int64
	// Nodes counts the schedulable nodes summed; Unschedulable those left
	// out because they are cordoned (spec.unschedulable).
	Nodes, Unschedulable int
}

// ClusterCapacity sums, per cluster, the allocatable resources of the
// nodes in the inventory (core v1 Node records) that are not cordoned. A
// cluster with no Node record is absent from the map: its capacity is not
// known, which is not the same as zero (every node cordoned).
//
// It reads one small index, never the Node documents: the column
// node_allocatable holds the few values needed, extracted when a record is
// written (migration 00005). Records are grouped by those values, since
// the nodes of one pool report the same quantities.
func (tx *Tx) ClusterCapacity(ctx context.Context) (map[string]Capacity, error) {
	rows, err := tx.query(ctx, `SELECT cluster, node_allocatable, count(*) FROM inventory
		WHERE kind = 'Node' AND api_version = 'v1' GROUP BY cluster, node_allocatable`)
	if err != nil {
		return nil, fmt.Errorf("cluster capacity: %w", classify(err))
	}
	defer rows.Close()
	out := map[string]Capacity{}
	// Clusters built from the same machine types share values: each
	// distinct one is decoded and parsed once.
	parsed := map[string]nodeAllocatable{}
	for rows.Next() {
		var (
			cluster string
			values  sql.NullString
			nodes   int
		)
		if err := rows.Scan(&cluster, &values, &nodes); err != nil {
			return nil, fmt.Errorf("cluster capacity: %w", classify(err))
		}
		a, ok := parsed[values.String]
		if !ok {
			a = parseNodeAllocatable(values.String)
			parsed[values.String] = a
		}
		c := out[cluster]
		if a.unschedulable {
			c.Unschedulable += nodes
		} else {
			n := int64(nodes)
			c.Nodes += nodes
			c.MilliCPU += n * a.milliCPU
			c.Memory += n * a.memory
			c.Pods += n * a.pods
		}
		out[cluster] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("cluster capacity: %w", classify(err))
	}
	return out, nil
}

// nodeAllocatable is one node's share of a Capacity.
type nodeAllocatable struct {
	milliCPU, memory, pods int64
	unschedulable          bool
}

// parseNodeAllocatable reads a node_allocatable value. The database
// writes it from the column's definition; a value that is missing (a
// record without its object, which was too large to publish) or does not
// decode counts as a node with nothing, and so does a malformed quantity:
// the kube-apiserver validates them, and one odd node must not stop
// placement.
func parseNodeAllocatable(s string) nodeAllocatable {
	var v struct{ CPU, Memory, Pods, Unschedulable string }
	if s != "" {
		_ = json.Unmarshal([]byte(s), &v)
	}
	return nodeAllocatable{
		milliCPU:      quantity(v.CPU, (*resource.Quantity).MilliValue),
		memory:        quantity(v.Memory, (*resource.Quantity).Value),
		pods:          quantity(v.Pods, (*resource.Quantity).Value),
		unschedulable: v.Unschedulable == "true",
	}
}

func quantity(s string, unit func(*resource.Quantity) int64) int64 {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0
	}
	return unit(&q)
}
