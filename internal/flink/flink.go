// Package flink is everything purser knows about the Apache Flink
// Kubernetes Operator (apache/flink-kubernetes-operator): how to judge a
// FlinkDeployment from the status the operator writes, where a job can be
// restored from (the savepoints and checkpoints the operator reports, and
// which job wrote them), and what stopping and resuming a job means for
// the operator. Each rule names the operator's class and method it rests
// on, so that it can be checked against the operator's source.
//
// It is knowledge, not a loop: pure functions over decoded objects, used
// by the health interpreter (internal/member/health), the failover
// controller (internal/control/failover) and the agent's fencing
// (internal/member/agent) alike. Finding a job's newest checkpoint in
// object storage is I/O and lives in the subpackage checkpoints, which
// only the controller links.
package flink

import (
	"encoding/json"
	"math"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Kinds of the operator's API that purser reads.
const (
	APIVersion        = "flink.apache.org/v1beta1"
	Group             = "flink.apache.org"
	KindDeployment    = "FlinkDeployment"
	KindStateSnapshot = "FlinkStateSnapshot"
)

// The objects read here come from clusters, files and fuzzers, so every
// read checks the type it finds and treats anything unexpected as absent;
// the rules then judge from what is missing rather than crash.

// get is the value at path, false when a step is absent or not a map.
func get(obj map[string]any, path ...string) (any, bool) {
	v, ok, err := unstructured.NestedFieldNoCopy(obj, path...)
	return v, ok && err == nil
}

// str is the string at path, or "" when it is absent or not a string.
func str(obj map[string]any, path ...string) string {
	v, _ := get(obj, path...)
	s, _ := v.(string)
	return s
}

// integer reads a count at path. Decoded JSON holds int64 (apimachinery's
// decoder) or float64 (encoding/json), and hand-built maps hold int; all
// are accepted, and ok is false for anything else or a fraction.
func integer(obj map[string]any, path ...string) (n int64, ok bool) {
	v, _ := get(obj, path...)
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, false
		}
		return int64(x), true
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}
