package store

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func testClusterKinds(t *testing.T, eng engine) {
	s := eng.open(t)
	ctx := t.Context()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, name := range []string{"dc1-a", "dc2-a"} {
		mustTx(t, s, func(tx *Tx) error { return tx.Clusters().Create(ctx, &Cluster{Name: name, Spec: []byte("{}")}) })
	}
	crb := ServedKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}
	widget := func(namespaced bool) ServedKind {
		return ServedKind{Group: "example.com", Version: "v1", Kind: "Widget", Namespaced: namespaced}
	}
	many := []ServedKind{crb, widget(true)}
	for i := range 250 { // more than one insert's worth
		many = append(many, ServedKind{Group: "g.example.com", Version: "v1", Kind: fmt.Sprintf("K%d", i), Namespaced: true})
	}
	mustTx(t, s, func(tx *Tx) error { return tx.Kinds().Replace(ctx, "dc1-a", t0, many) })
	mustTx(t, s, func(tx *Tx) error { return tx.Kinds().Replace(ctx, "dc2-a", t0, []ServedKind{widget(false)}) })
	// An agent of a cluster that is not registered is not believed.
	mustTx(t, s, func(tx *Tx) error { return tx.Kinds().Replace(ctx, "rogue", t0, []ServedKind{crb}) })

	scopes := func(k ServedKind) []bool {
		var out []bool
		mustRead(t, s, func(tx *Tx) (err error) { out, err = tx.Kinds().Scopes(ctx, k.Group, k.Kind); return })
		slices.SortFunc(out, func(a, b bool) int {
			if a == b {
				return 0
			} else if a {
				return 1
			}
			return -1
		})
		return out
	}
	if got := scopes(widget(false)); !slices.Equal(got, []bool{false, true}) {
		t.Fatalf("Widget scopes %v, want one cluster each way", got)
	}
	if got := scopes(crb); !slices.Equal(got, []bool{false}) {
		t.Fatalf("ClusterRoleBinding scopes %v: the unregistered cluster counted", got)
	}
	var listed []ServedKind
	mustRead(t, s, func(tx *Tx) (err error) { listed, err = tx.Kinds().List(ctx, "dc1-a"); return })
	if len(listed) != len(many) {
		t.Fatalf("dc1-a lists %d kinds, want %d", len(listed), len(many))
	}

	// A newer report replaces the old one; an older one changes nothing.
	mustTx(t, s, func(tx *Tx) error {
		return tx.Kinds().Replace(ctx, "dc1-a", t0.Add(time.Minute), []ServedKind{crb})
	})
	mustTx(t, s, func(tx *Tx) error { return tx.Kinds().Replace(ctx, "dc1-a", t0, many) })
	mustRead(t, s, func(tx *Tx) (err error) { listed, err = tx.Kinds().List(ctx, "dc1-a"); return })
	if !slices.Equal(listed, []ServedKind{crb}) {
		t.Fatalf("dc1-a after a newer report and a late older one: %v", listed)
	}
	if got := scopes(widget(true)); !slices.Equal(got, []bool{false}) {
		t.Fatalf("Widget scopes %v after dc1-a stopped serving it", got)
	}
}
