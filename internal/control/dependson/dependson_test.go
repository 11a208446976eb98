package dependson_test

import (
	"context"
	"strings"
	"testing"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/dependson"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// TestLacks: a cluster has a dependency only where the deployable is
// Synced at its current generation; the words name which and why.
func TestLacks(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			ctx := context.Background()
			s, err := store.Open(ctx, eng.NewDSN(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			d := &store.Deployable{Namespace: "a", Name: "cfg", UID: "uid-cfg", Generation: 2, Spec: []byte(`{}`), SpecHash: "h"}
			err = s.Tx(ctx, func(tx *store.Tx) error {
				for _, c := range []string{"dc1", "dc2", "dc3"} {
					if err := tx.Clusters().Create(ctx, &store.Cluster{Name: c, Spec: []byte(`{}`)}); err != nil {
						return err
					}
				}
				if err := tx.Deployables().Create(ctx, d); err != nil {
					return err
				}
				if err := tx.Deployables().PutStatus(ctx, &store.DeployableClusterStatus{DeployableUID: d.UID, Cluster: "dc1",
					State: string(v1alpha1.StateSynced), SyncedGeneration: 2}); err != nil {
					return err
				}
				return tx.Deployables().PutStatus(ctx, &store.DeployableClusterStatus{DeployableUID: d.UID, Cluster: "dc2",
					State: string(v1alpha1.StateSynced), SyncedGeneration: 1})
			})
			if err != nil {
				t.Fatal(err)
			}
			var lacks map[string]string
			read := func(deps ...v1alpha1.Dependency) {
				t.Helper()
				if err := s.Read(ctx, func(tx *store.Tx) (err error) {
					lacks, err = dependson.Lacks(ctx, tx, "a", deps, []string{"dc1", "dc2", "dc3"})
					return err
				}); err != nil {
					t.Fatal(err)
				}
			}
			read(v1alpha1.Dependency{Deployable: "cfg"})
			if lacks["dc1"] != "" {
				t.Errorf("dc1 has cfg at its generation, yet lacks %q", lacks["dc1"])
			}
			if !strings.Contains(lacks["dc2"], "deployable cfg not synced at generation 2 (Synced at generation 1)") {
				t.Errorf("dc2: %q", lacks["dc2"])
			}
			if !strings.Contains(lacks["dc3"], "deployable cfg not synced there yet") {
				t.Errorf("dc3: %q", lacks["dc3"])
			}
			read(v1alpha1.Dependency{Deployable: "cfg"}, v1alpha1.Dependency{Deployable: "gone"})
			if !strings.Contains(lacks["dc1"], "deployable gone does not exist") {
				t.Errorf("dc1: %q", lacks["dc1"])
			}
			read()
			if lacks["dc3"] != "" {
				t.Errorf("no dependencies, yet dc3 lacks %q", lacks["dc3"])
			}
		})
	}
}
