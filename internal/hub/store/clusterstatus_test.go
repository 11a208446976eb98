package store

import (
	"bytes"
	"reflect"
	"testing"
)

func TestUpdateClusterStatus(t *testing.T) {
	for _, eng := range engines(t) {
		t.Run(eng.name, func(t *testing.T) {
			t.Parallel()
			s := eng.open(t)
			ctx := t.Context()
			c := &Cluster{Name: "dc1-a", Labels: map[string]string{"dc": "dc1"}, Spec: []byte(`{"spec":{}}`), Kubeconfig: []byte{1, 2, 3}}
			mustTx(t, s, func(tx *Tx) error { return tx.Clusters().Create(ctx, c) })

			status := []byte(`{"conditions":[{"type":"Ready","status":"Unknown"}],"taints":[{"key":"purser.io/unreachable","effect":"NoSchedule"}]}`)
			mustTx(t, s, func(tx *Tx) error { return tx.Clusters().UpdateStatus(ctx, "dc1-a", status) })
			var got *Cluster
			mustRead(t, s, func(tx *Tx) (err error) { got, err = tx.Clusters().Get(ctx, "dc1-a"); return })
			want := *c
			want.Status = status
			if !reflect.DeepEqual(got, &want) {
				t.Fatalf("after a status write:\n got %+v\nwant %+v (only the status changes, not the version)", got, &want)
			}

			// An admin's update made after the status write keeps it, as
			// the API's PUT does: it writes back the status it read.
			got.Labels = map[string]string{"dc": "dc1", "tier": "prod"}
			mustTx(t, s, func(tx *Tx) error { return tx.Clusters().Update(ctx, got) })
			var after *Cluster
			mustRead(t, s, func(tx *Tx) (err error) { after, err = tx.Clusters().Get(ctx, "dc1-a"); return })
			if !bytes.Equal(after.Status, status) || after.ResourceVersion != 2 || after.Labels["tier"] != "prod" {
				t.Fatalf("after an admin update: %+v", after)
			}

			mustTx(t, s, func(tx *Tx) error { return tx.Clusters().UpdateStatus(ctx, "dc1-a", nil) })
			mustRead(t, s, func(tx *Tx) (err error) { after, err = tx.Clusters().Get(ctx, "dc1-a"); return })
			if after.Status != nil {
				t.Fatalf("status after clearing it: %q", after.Status)
			}
			wantErr(t, s.Tx(ctx, func(tx *Tx) error { return tx.Clusters().UpdateStatus(ctx, "nope", status) }), ErrNotFound)
		})
	}
}
