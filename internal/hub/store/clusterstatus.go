package store

import (
	"context"
	"fmt"
)

// UpdateClusterStatus replaces the status of the cluster called name and
// nothing else; ErrNotFound when there is no such cluster. It is the
// controller's write: the status is its own, so there is no optimistic
// check against what an admin did meanwhile.
//
// It leaves resource_version and updated_at alone. They version what
// admins write (labels, spec, kubeconfig), and components key on them:
// the standalone runner restarts a cluster's agent and the syncer
// re-decides placements when the version moves, which a health change must
// not cause. The price: UpdateCluster writes back the status it read, so
// on PostgreSQL an admin's update that read the row just before this write
// commits may put the previous status back. The controller compares the
// stored status with its own on every pass and writes it again, so such a
// lapse lasts one probe interval. (On SQLite writers are serialized and it
// cannot happen.)
func (tx *Tx) UpdateClusterStatus(ctx context.Context, name string, status []byte) error {
	res, err := tx.exec(ctx, `UPDATE clusters SET status = ? WHERE name = ?`, nullText(status), name)
	if err != nil {
		return fmt.Errorf("update status of cluster %s: %w", name, classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("update status of cluster %s: %w", name, classify(err))
	}
	if n == 0 {
		return fmt.Errorf("update status of cluster %s: %w", name, ErrNotFound)
	}
	return nil
}
