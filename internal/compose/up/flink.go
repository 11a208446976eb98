package up

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/purser-io/purser/internal/flink/checkpoints"
	"github.com/purser-io/purser/internal/sandbox"
	"github.com/purser-io/purser/internal/sandbox/flinksim"
)

// FlinkStorageDir is the folder under the data folder holding the sandbox's
// S3-compatible store of Flink checkpoints and savepoints.
const FlinkStorageDir = "flink-storage"

// flinkFarm is what --flink adds to the sandbox: one S3-compatible store
// for every cluster's checkpoints and savepoints, and in each cluster the
// FlinkDeployment CRD and a simulator of the Flink Kubernetes Operator
// (internal/sandbox/flinksim), which follows the operator's state machine
// but runs no Flink: its jobs are simulated, their checkpoints are
// _metadata files in the store.
type flinkFarm struct {
	ctx     context.Context // the simulators' lifetime
	storage *flinksim.Storage
	log     *slog.Logger

	mu   sync.Mutex
	sims map[string]*runningSim // by cluster; absent while the cluster is stopped
}

type runningSim struct {
	sim    *flinksim.Simulator
	cancel context.CancelFunc
}

// startFlink starts the store and a simulator on every cluster of fleet,
// each after installing the CRD. stop stops the simulators, then the store.
func startFlink(ctx context.Context, dataDir string, fleet *sandbox.Fleet, out io.Writer, log *slog.Logger) (*flinkFarm, error) {
	storage, err := flinksim.StartStorage(ctx, filepath.Join(dataDir, FlinkStorageDir), "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &flinkFarm{ctx: ctx, storage: storage, log: log.With("component", "flink-operator-simulator"), sims: map[string]*runningSim{}}
	for _, c := range fleet.Clusters() {
		if err := f.start(ctx, c); err != nil {
			f.stop()
			return nil, err
		}
	}
	fmt.Fprintf(out, "Flink operator SIMULATOR (internal/sandbox/flinksim, not the real operator: no Flink runs, its jobs and checkpoints are simulated) in %s\n",
		strings.Join(clusterNames(fleet), ", "))
	fmt.Fprintf(out, "Flink checkpoint and savepoint storage (S3-compatible, gofakes3): http://%s, kept in %s\n",
		storage.Endpoint(), storage.Dir())
	return f, nil
}

// checkpointStore is how the failover controller reaches the store.
func (f *flinkFarm) checkpointStore() checkpoints.Config {
	return checkpoints.Config{Endpoint: f.storage.Endpoint(), AccessKeyID: flinksim.StorageAccessKey,
		SecretAccessKey: flinksim.StorageSecretKey, Insecure: true}
}

// start installs the CRD on c and starts its simulator, which runs until
// stopCluster or stop.
func (f *flinkFarm) start(ctx context.Context, c *sandbox.Cluster) error {
	cfg := c.RESTConfig()
	if err := flinksim.InstallCRD(ctx, cfg); err != nil {
		return fmt.Errorf("%s: %w", c.Name(), err)
	}
	sctx, cancel := context.WithCancel(f.ctx)
	sim, err := flinksim.Start(sctx, c.Name(), cfg, flinksim.Config{Checkpoints: f.storage.WriteMetadata, Logger: f.log})
	if err != nil {
		cancel()
		return fmt.Errorf("%s: Flink operator simulator: %w", c.Name(), err)
	}
	f.mu.Lock()
	f.sims[c.Name()] = &runningSim{sim: sim, cancel: cancel}
	f.mu.Unlock()
	return nil
}

// stopCluster stops the simulator of cluster name, and with it the
// simulated Flink jobs of that cluster: they write no more checkpoints.
func (f *flinkFarm) stopCluster(name string) {
	f.mu.Lock()
	r := f.sims[name]
	delete(f.sims, name)
	f.mu.Unlock()
	if r != nil {
		r.cancel()
		r.sim.Wait()
	}
}

// stop stops every simulator, then the store.
func (f *flinkFarm) stop() {
	f.mu.Lock()
	names := make([]string, 0, len(f.sims))
	for name := range f.sims {
		names = append(names, name)
	}
	f.mu.Unlock()
	for _, name := range names {
		f.stopCluster(name)
	}
	f.storage.Close()
}

// fault sets fault ("": none) on the FlinkDeployment namespace/name in
// cluster, or in every running cluster that holds it when cluster is "".
func (f *flinkFarm) fault(namespace, name, fault, cluster string) (string, error) {
	var ft flinksim.Fault
	if fault != "" {
		var err error
		if ft, err = flinksim.ParseFault(fault); err != nil {
			return "", fmt.Errorf("%w: %w", sandbox.ErrInvalid, err)
		}
	}
	if namespace == "" || name == "" {
		return "", fmt.Errorf("%w: name a FlinkDeployment as NAMESPACE/NAME", sandbox.ErrInvalid)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var on []string
	for c, r := range f.sims {
		if cluster != "" && c != cluster {
			continue
		}
		// A named cluster gets the fault even before the object exists
		// there (the simulator keeps it for the name); otherwise a fault
		// goes where the object is, and a recovery where a fault is, the
		// copy there may be gone (moved elsewhere).
		if cluster == "" && ((ft != 0 && !r.sim.Has(namespace, name)) || (ft == 0 && r.sim.FaultOf(namespace, name) == 0)) {
			continue
		}
		if ft == 0 {
			r.sim.Recover(namespace, name)
		} else {
			r.sim.Fail(namespace, name, ft)
		}
		on = append(on, c)
	}
	slices.Sort(on)
	switch {
	case len(on) == 0 && cluster != "":
		return "", fmt.Errorf("%w: %s is not a running sandbox cluster with the Flink operator simulator", sandbox.ErrNoCluster, cluster)
	case len(on) == 0 && ft == 0:
		return "", fmt.Errorf("%w: no running sandbox cluster has a fault set on FlinkDeployment %s/%s", sandbox.ErrNoCluster, namespace, name)
	case len(on) == 0:
		return "", fmt.Errorf("%w: no running sandbox cluster holds FlinkDeployment %s/%s (purser get runnable %s -n %s says where it runs)",
			sandbox.ErrNoCluster, namespace, name, name, namespace)
	case ft == 0:
		return fmt.Sprintf("FlinkDeployment %s/%s on %s: fault removed; the simulator runs its job again at its next pass", namespace, name, strings.Join(on, ", ")), nil
	}
	return fmt.Sprintf("FlinkDeployment %s/%s on %s: fault %s set; the simulated operator reports it at its next pass (purser describe runnable %s -n %s shows what purser makes of it)",
		namespace, name, strings.Join(on, ", "), ft, name, namespace), nil
}

func clusterNames(fleet *sandbox.Fleet) []string {
	var names []string
	for _, c := range fleet.Clusters() {
		names = append(names, c.Name())
	}
	return names
}
