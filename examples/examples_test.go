// Package examples holds the YAML files the README points newcomers to;
// the test keeps every one of them valid.
package examples

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
)

func TestExamplesAreValid(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := v1alpha1.Decode(data, "application/yaml")
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		var errs v1alpha1.FieldErrors
		switch o := obj.(type) {
		case *v1alpha1.Runnable:
			o.SetDefaults()
			errs = v1alpha1.ValidateRunnable(o, time.Now())
		case *v1alpha1.Deployable:
			errs = v1alpha1.ValidateDeployable(o)
		case *v1alpha1.Cluster:
			errs = v1alpha1.ValidateCluster(o)
		case *v1alpha1.Quota:
			errs = v1alpha1.ValidateQuota(o, o.Metadata.Name)
		case *v1alpha1.Schedule:
			o.SetDefaults()
			errs = v1alpha1.ValidateSchedule(o, time.Now())
		case *v1alpha1.Trigger:
			o.SetDefaults()
			errs = v1alpha1.ValidateTrigger(o, time.Now())
		default:
			t.Errorf("%s: no validation of %T here", f, obj)
		}
		if len(errs) > 0 {
			t.Errorf("%s: %s", f, errs)
		}
	}
}

// TestFlinkExampleRestoresExactly keeps the Flink example restoring from
// the restore point carried (restorePath) and from nothing else: a job's
// checkpoint directory is not something Flink can restore from.
func TestFlinkExampleRestoresExactly(t *testing.T) {
	data, err := os.ReadFile("runnable-flink.yaml")
	if err != nil {
		t.Fatal(err)
	}
	obj, err := v1alpha1.Decode(data, "application/yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := obj.(*v1alpha1.Runnable)
	r.SetDefaults()
	f := r.Spec.Failover
	if f.Application.StatePreservation.RestorePoint != v1alpha1.RestorePointRequired || f.Consistency != v1alpha1.ConsistencyAtMostOne {
		t.Errorf("the example should wait for a restore point: %+v", f.Application.StatePreservation)
	}
	if len(f.Mutations) != 1 || f.Mutations[0].Value != v1alpha1.RestorePathVariable || f.Mutations[0].Path != "spec.job.initialSavepointPath" {
		t.Errorf("the example's mutation should set initialSavepointPath to restorePath: %+v", f.Mutations)
	}
}
