package syncer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/domain/rollout"
	"github.com/purser-io/purser/internal/hub/store"
)

// dependentKey names the runnables of one cluster that depend on one
// deployable.
type dependentKey struct{ namespace, deployable, cluster string }

// maxDependents bounds the runnables one pass reads in one namespace.
const maxDependents = 5000

// dependentProblems is the rollout's built-in gate: a runnable that names
// a deployable in spec.dependsOn and runs Unhealthy on a cluster is a
// problem of that deployable there, observed when the runnable turned
// Unhealthy (status.unhealthySince), so that, as for every gate, one that
// was unhealthy before the new generation landed does not count. It reads
// the runnables of the given namespaces once per pass.
func dependentProblems(ctx context.Context, tx *store.Tx, namespaces []string) (map[dependentKey][]rollout.Problem, error) {
	out := map[dependentKey][]rollout.Problem{}
	for _, ns := range namespaces {
		next, read := "", 0
		for {
			page, cont, err := tx.Runnables().List(ctx, store.RunnableFilter{Namespace: ns, Limit: 1000, Continue: next})
			if err != nil {
				return nil, err
			}
			for _, rec := range page {
				if deps := unhealthyDependent(rec); len(deps) > 0 {
					p, err := dependentProblem(rec)
					if err != nil {
						return nil, err
					}
					if p.At.IsZero() {
						continue
					}
					for _, d := range deps {
						k := dependentKey{rec.Namespace, d, rec.Cluster}
						out[k] = append(out[k], p)
					}
				}
			}
			read += len(page)
			if cont == "" || read >= maxDependents {
				break
			}
			next = cont
		}
	}
	return out, nil
}

// unhealthyDependent returns the deployables a running runnable depends
// on when it may be a problem: running or submitted on a cluster, with a
// dependsOn. Its health is read by dependentProblem.
func unhealthyDependent(rec *store.Runnable) []string {
	phase := v1alpha1.Phase(rec.Phase)
	if rec.Cluster == "" || (phase != v1alpha1.PhaseRunning && phase != v1alpha1.PhaseSubmitted) ||
		!bytes.Contains(rec.Spec, []byte(`"dependsOn"`)) || !bytes.Contains(rec.Status, []byte(`"unhealthySince"`)) {
		return nil
	}
	var doc store.Document[v1alpha1.RunnableSpec]
	if json.Unmarshal(rec.Spec, &doc) != nil {
		return nil
	}
	var names []string
	for _, d := range doc.Spec.DependsOn {
		if !slices.Contains(names, d.Deployable) {
			names = append(names, d.Deployable)
		}
	}
	return names
}

// dependentProblem is the problem an Unhealthy dependent runnable is, or
// an empty one (no At) when it is not Unhealthy.
func dependentProblem(rec *store.Runnable) (rollout.Problem, error) {
	var st v1alpha1.RunnableStatus
	if err := json.Unmarshal(rec.Status, &st); err != nil {
		return rollout.Problem{}, fmt.Errorf("runnable %s/%s: stored status: %w", rec.Namespace, rec.Name, err)
	}
	if st.Health != v1alpha1.HealthUnhealthy || st.UnhealthySince == nil {
		return rollout.Problem{}, nil
	}
	why := "runs Unhealthy"
	if msg, _, _ := strings.Cut(st.Message, "\n"); msg != "" {
		why += " (" + truncate(msg, 200) + ")"
	}
	return rollout.Problem{Object: v1alpha1.KindRunnable + "/" + rec.Namespace + "/" + rec.Name,
		Reason: "depends on it (spec.dependsOn) and " + why, At: *st.UnhealthySince}, nil
}

// truncate keeps the first n characters of s.
func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
