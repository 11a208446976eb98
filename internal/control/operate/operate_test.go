package operate_test

import (
	"errors"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/control/operate"
)

func TestSuspendSpec(t *testing.T) {
	flinkJob := map[string]any{"spec": map[string]any{"job": map[string]any{"jarURI": "local:///x.jar", "upgradeMode": "savepoint"}}}
	session := map[string]any{"spec": map[string]any{"flinkVersion": "v1_20"}}
	cases := []struct {
		name     string
		gk       schema.GroupKind
		template map[string]any
		suspend  bool
		want     map[string]any
		refused  bool
	}{
		{"job suspended", schema.GroupKind{Group: "batch", Kind: "Job"}, nil, true, map[string]any{"suspend": true}, false},
		{"job resumed", schema.GroupKind{Group: "batch", Kind: "Job"}, nil, false, map[string]any{"suspend": false}, false},
		{"workflow suspended", schema.GroupKind{Group: "argoproj.io", Kind: "Workflow"}, nil, true, map[string]any{"suspend": true}, false},
		{"flink suspended", schema.GroupKind{Group: "flink.apache.org", Kind: "FlinkDeployment"}, flinkJob, true,
			map[string]any{"job": map[string]any{"state": "suspended"}}, false},
		{"flink resumed", schema.GroupKind{Group: "flink.apache.org", Kind: "FlinkDeployment"}, flinkJob, false,
			map[string]any{"job": map[string]any{"state": "running"}}, false},
		{"flink session refused", schema.GroupKind{Group: "flink.apache.org", Kind: "FlinkDeployment"}, session, true, nil, true},
		{"deployment refused", schema.GroupKind{Group: "apps", Kind: "Deployment"}, nil, true, nil, true},
		{"core pod refused", schema.GroupKind{Kind: "Pod"}, nil, true, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := operate.SuspendSpec(c.gk, c.template, c.suspend)
			var refused *operate.NotSuspendableError
			if c.refused {
				if !errors.As(err, &refused) {
					t.Fatalf("SuspendSpec = %v, %v; want a NotSuspendableError", got, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("SuspendSpec = %v, %v; want %v", got, err, c.want)
			}
		})
	}
}
