package flinksim

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SnapshotResource is the FlinkStateSnapshot resource of operator 1.10+.
var SnapshotResource = schema.GroupVersionResource{Group: "flink.apache.org", Version: "v1beta1", Resource: "flinkstatesnapshots"}

// createSnapshot records a completed savepoint or checkpoint as the
// operator does from 1.10 with the CRD installed: a FlinkStateSnapshot
// whose spec.jobReference names the FlinkDeployment
// (FlinkStateSnapshotUtils.createSavepointResource,
// createUpgradeSnapshotResource), labelled as getSnapshotLabels labels it,
// with status.state COMPLETED and status.path the location
// (FlinkStateSnapshotUtils.snapshotSuccessful). The operator creates it
// first and fills its status once Flink reports the savepoint; the
// simulator writes both at once.
func (s *Simulator) createSnapshot(ctx context.Context, owner *unstructured.Unstructured, snap snapshotRecord) error {
	typ, body := "SAVEPOINT", map[string]any{"path": snap.path, "alreadyExists": true, "disposeOnDelete": false}
	key := "savepoint"
	if snap.checkpoint {
		typ, key, body = "CHECKPOINT", "checkpoint", map[string]any{}
	}
	name := fmt.Sprintf("%s-%s-%d", owner.GetName(), strings.ToLower(snap.triggerType), snap.at.UnixMilli())
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": SnapshotResource.GroupVersion().String(),
		"kind":       "FlinkStateSnapshot",
		"metadata": map[string]any{
			"name":      name,
			"namespace": owner.GetNamespace(),
			"labels": map[string]any{
				"snapshot.type":         typ,
				"snapshot.trigger-type": snap.triggerType,
				"snapshot.state":        "COMPLETED",
				"job-reference.kind":    "FlinkDeployment",
				"job-reference.name":    owner.GetName(),
			},
		},
		"spec": map[string]any{
			"jobReference": map[string]any{"kind": "FlinkDeployment", "name": owner.GetName()},
			key:            body,
		},
	}}
	client := s.dyn.Resource(SnapshotResource).Namespace(owner.GetNamespace())
	created, err := client.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create FlinkStateSnapshot %s: %w", name, err)
	}
	ts := snap.at.UTC().Format("2006-01-02T15:04:05.000000Z") // DateTimeUtils.kubernetes
	created.Object["status"] = map[string]any{"state": "COMPLETED", "path": snap.path,
		"triggerTimestamp": ts, "resultTimestamp": ts, "failures": int64(0)}
	if _, err := client.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("status of FlinkStateSnapshot %s: %w", name, err)
	}
	return nil
}
