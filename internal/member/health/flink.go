package health

import "github.com/purser-io/purser/internal/flink"

// interpretFlinkDeployment judges a FlinkDeployment as internal/flink
// reads the Flink Kubernetes Operator's status; the rules, and the
// operator's code each rests on, are there and in docs/health.md.
func interpretFlinkDeployment(obj map[string]any) Result {
	return Result(flink.JudgeDeployment(obj))
}
