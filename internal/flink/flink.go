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

// Kinds of the operator's API that purser reads.
const (
	APIVersion        = "flink.apache.org/v1beta1"
	Group             = "flink.apache.org"
	KindDeployment    = "FlinkDeployment"
	KindStateSnapshot = "FlinkStateSnapshot"
)
