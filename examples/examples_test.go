// Package examples holds the YAML files the README points newcomers to;
// the test keeps every one of them valid.
package examples

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/native"
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
		if isObj, err := isNative(data); err != nil || isObj {
			if err != nil {
				t.Errorf("%s: %v", f, err)
			}
			continue // a native object: TestNativeExamplesAreSelected
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
		case *v1alpha1.PlacementPolicy:
			errs = v1alpha1.ValidatePlacementPolicy(o, o.Kind, time.Now())
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

// isNative says whether data is a native object (not of purser's kinds),
// which is written to /k8s, where a placement policy selects it.
func isNative(data []byte) (bool, error) {
	var tm v1alpha1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return false, err
	}
	return tm.APIVersion != v1alpha1.GroupVersion, nil
}

// TestNativeExamplesAreSelected: each native object among the examples is
// selected by a placement policy among them, which makes it a valid
// runnable.
func TestNativeExamplesAreSelected(t *testing.T) {
	files, _ := filepath.Glob("*.yaml")
	var policies []native.Policy
	var objects []map[string]any
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if ok, _ := isNative(data); ok {
			var obj map[string]any
			if err := yaml.Unmarshal(data, &obj); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			objects = append(objects, obj)
			continue
		}
		if obj, err := v1alpha1.Decode(data, "application/yaml"); err == nil {
			if p, ok := obj.(*v1alpha1.PlacementPolicy); ok {
				policies = append(policies, native.Policy{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, Spec: p.Spec})
			}
		}
	}
	if len(objects) == 0 {
		t.Fatal("no native example")
	}
	for _, obj := range objects {
		u := unstructured.Unstructured{Object: obj}
		o := native.Object{GVK: u.GroupVersionKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Labels: u.GetLabels()}
		p, _ := native.Select(policies, o)
		if p == nil {
			t.Errorf("%s %s/%s: %s", o.GVK.Kind, o.Namespace, o.Name, native.Unselected(policies, o))
			continue
		}
		r := native.RunnableOf(p, obj)
		r.SetDefaults()
		if errs := v1alpha1.ValidateRunnable(r, time.Now()); len(errs) > 0 {
			t.Errorf("%s %s/%s as the runnable of %s: %s", o.GVK.Kind, o.Namespace, o.Name, p.Ref(), errs)
		}
	}
}
