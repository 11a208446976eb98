// Package clusterstest registers member clusters for tests the way the
// API does, straight into the database, for tests of the components that
// read the registry (submitter, syncer, health monitor).
package clusterstest

import (
	"context"
	"testing"

	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
)

// Register writes row as the API would, with kubeconfig sealed for the
// row's name; an empty row.Spec is an empty spec. It fails the test on
// any error, a taken name included.
func Register(t testing.TB, st *store.Store, sealer *seal.Sealer, row store.Cluster, kubeconfig []byte) {
	t.Helper()
	sealed, err := sealer.Seal(kubeconfig, seal.KubeconfigBinding(row.Name))
	if err != nil {
		t.Fatal(err)
	}
	row.Kubeconfig = sealed
	if len(row.Spec) == 0 {
		row.Spec = []byte(`{"spec":{}}`)
	}
	ctx := context.Background()
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.Clusters().Create(ctx, &row) }); err != nil {
		t.Fatalf("register cluster %s: %v", row.Name, err)
	}
}
