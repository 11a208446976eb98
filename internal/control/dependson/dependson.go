// Package dependson reads what a runnable's spec.dependsOn asks of a
// cluster: each named deployable of its namespace Synced there at the
// deployable's current generation. The submitter reads it before it
// places a runnable and the failover controller before it moves one, so
// that both refuse a cluster for the same reason, in the same words.
package dependson

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store"
)

// Lacks returns, for each of clusters, what it lacks of deps in words
// ("deployable app-config not synced: Pending at generation 1 of 2"),
// or "" when it has all of them. Nil deps lack nothing.
func Lacks(ctx context.Context, tx *store.Tx, namespace string, deps []v1alpha1.Dependency, clusters []string) (map[string]string, error) {
	out := make(map[string]string, len(clusters))
	if len(deps) == 0 {
		return out, nil
	}
	missing := map[string][]string{}
	for _, dep := range deps {
		d, err := tx.Deployables().Get(ctx, namespace, dep.Deployable)
		if errors.Is(err, store.ErrNotFound) || (err == nil && d.DeletedAt != nil) {
			for _, c := range clusters {
				missing[c] = append(missing[c], fmt.Sprintf("deployable %s does not exist", dep.Deployable))
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		statuses, err := tx.Deployables().ListStatus(ctx, d.UID)
		if err != nil {
			return nil, err
		}
		byCluster := map[string]*store.DeployableClusterStatus{}
		for _, st := range statuses {
			byCluster[st.Cluster] = st
		}
		for _, c := range clusters {
			st := byCluster[c]
			switch {
			case st == nil:
				missing[c] = append(missing[c], fmt.Sprintf("deployable %s not synced there yet", dep.Deployable))
			case st.State != string(v1alpha1.StateSynced) || st.SyncedGeneration != d.Generation:
				missing[c] = append(missing[c], fmt.Sprintf("deployable %s not synced at generation %d (%s at generation %d)",
					dep.Deployable, d.Generation, st.State, st.SyncedGeneration))
			}
		}
	}
	for _, c := range clusters {
		out[c] = strings.Join(missing[c], ", ")
	}
	return out, nil
}
