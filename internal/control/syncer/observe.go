package syncer

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/rollout"
)

// maxDriftPaths bounds the fields a drift message names.
const maxDriftPaths = 10

// dryRun is what a server-side apply of d would make of the cluster's
// object, asked of the cluster with dryRun=All so that nothing is written
// (the rule of Kubernetes' apply dry run, apiserver's
// handlers/patch.go: a dry-run request runs admission and defaulting and
// skips the storage write). cur is the object as it is, nil when absent.
func (w *clusterWorker) dryRun(ctx context.Context, d *deployable, ri dynamic.ResourceInterface, namespaced bool) (cur, would *unstructured.Unstructured, err error) {
	cur, err = ri.Get(ctx, d.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cur, err = nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	obj, err := d.object(w.s.cfg.Sealer, namespaced, w.info.Load().Labels)
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	would, err = ri.Apply(ctx, d.name, obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}})
	return cur, would, err
}

// observe serves spec.mode Observe: the cluster's copy is compared with
// what an apply would make of it, by a dry run, and the difference is
// reported (as field paths: a Secret's values never appear); nothing is
// ever written.
func (w *clusterWorker) observe(ctx context.Context, d *deployable, ri dynamic.ResourceInterface, namespaced bool) outcome {
	cur, would, err := w.dryRun(ctx, d, ri, namespaced)
	switch {
	case apierrors.IsNotFound(err) && namespaced:
		return outcome{state: v1alpha1.StateOutOfSync, message: "observed: missing on the cluster (its namespace too)"}
	case err != nil:
		return outcome{state: v1alpha1.StateOutOfSync, message: "observe: dry run failed: " + err.Error(), err: err}
	case cur == nil:
		return outcome{state: v1alpha1.StateOutOfSync, message: "observed: missing on the cluster"}
	}
	if paths := rollout.Drift(cur.Object, would.Object); len(paths) > 0 {
		return outcome{state: v1alpha1.StateOutOfSync, message: "observed drift, not repaired (mode Observe): " + summarize(paths)}
	}
	return synced("observed: in sync (mode Observe)")
}

func summarize(paths []string) string {
	if len(paths) > maxDriftPaths {
		return strings.Join(paths[:maxDriftPaths], ", ") + fmt.Sprintf(" and %d more", len(paths)-maxDriftPaths)
	}
	return strings.Join(paths, ", ")
}
