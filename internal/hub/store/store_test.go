package store

import (
	"context"
	"errors"
	"testing"

	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// engine is one database the suite runs against; newDSN provisions a fresh,
// empty database for one test and arranges for its removal.
type engine struct {
	name   string
	newDSN func(t testing.TB) string
}

// engines lists every engine, so that each behaviour is tested on both. The
// PostgreSQL half needs PURSER_TEST_POSTGRES: without it the half is
// skipped on a workstation and fails in CI (see storetest).
func engines(testing.TB) []engine {
	var out []engine
	for _, e := range storetest.Engines() {
		out = append(out, engine{name: e.Name, newDSN: e.NewDSN})
	}
	return out
}

// open opens a fresh database of eng, closed when the test ends.
func (eng engine) open(t testing.TB) *Store {
	t.Helper()
	return openDSN(t, eng.newDSN(t))
}

func openDSN(t testing.TB, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// rawExec runs SQL behind the Store's back, as an intruder or an operator
// with a database shell would.
func rawExec(t *testing.T, s *Store, q string, args ...any) {
	t.Helper()
	if _, err := s.write.ExecContext(t.Context(), s.d.rebind(q), args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// suite is every behaviour of the store; TestStore runs each case on each
// engine, against its own fresh database.
var suite = []struct {
	name string
	fn   func(t *testing.T, eng engine)
}{
	{"Runnables", testRunnables},
	{"RunnableOptimisticConcurrency", testRunnableOptimisticConcurrency},
	{"DeleteRunnable", testDeleteRunnable},
	{"ListRunnables", testListRunnables},
	{"ListRunnablesStableUnderInserts", testListRunnablesStableUnderInserts},
	{"Attempts", testAttempts},
	{"CreateLandedBy", testCreateLandedBy},
	{"Deployables", testDeployables},
	{"DeployablesVersion", testDeployablesVersion},
	{"Clusters", testClusters},
	{"Timestamps", testTimestamps},
	{"AuditConcurrentChain", testAuditConcurrentChain},
	{"AuditMACs", testAuditMACs},
	{"AuditTampering", testAuditTampering},
	{"AuditAnchored", testAuditAnchored},
	{"AuditManyBatches", testAuditManyBatches},
	{"ListAudit", testListAudit},
	{"Outbox", testOutbox},
	{"RollbackLeavesNothing", testRollbackLeavesNothing},
	{"RetryOnSerializationFailure", testRetry},
	{"UnavailableAfterClose", testUnavailableAfterClose},
	{"MigrationsIdempotent", testMigrationsIdempotent},
	{"AgentFreshness", testAgentFreshness},
	{"ClusterViews", testClusterViews},
	{"HubLeases", testHubLeases},
	{"CheckWrites", testCheckWrites},
	{"ReadInfo", testReadInfo},
	{"DurableAuditHead", testDurableAuditHead},
	{"AbandonedTransaction", testAbandonedTransaction},
	{"GroupCommit", testGroupCommit},
	{"ClusterKinds", testClusterKinds},
	{"Counts", testCounts},
	{"InventorySystem", testInventorySystem},
	{"InventoryLabelSelector", testInventoryLabelSelector},
	{"ConcurrentOpen", testConcurrentOpen},
}

func TestStore(t *testing.T) {
	for _, eng := range engines(t) {
		t.Run(eng.name, func(t *testing.T) {
			for _, tc := range suite {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(t, eng)
				})
			}
		})
	}
}

func mustTx(t *testing.T, s *Store, fn func(tx *Tx) error) {
	t.Helper()
	if err := s.Tx(t.Context(), fn); err != nil {
		t.Fatalf("Tx: %v", err)
	}
}

func mustRead(t *testing.T, s *Store, fn func(tx *Tx) error) {
	t.Helper()
	if err := s.Read(t.Context(), fn); err != nil {
		t.Fatalf("Read: %v", err)
	}
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
}
