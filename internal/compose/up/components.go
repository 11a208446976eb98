package up

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/control/controller"
	"github.com/purser-io/purser/internal/control/failover"
	"github.com/purser-io/purser/internal/control/submitter"
	"github.com/purser-io/purser/internal/control/syncer"
	"github.com/purser-io/purser/internal/hub/seal"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/member/agent"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/member/health"
	"github.com/purser-io/purser/internal/member/inventory"
)

// runner is a component: it runs until its context ends.
type runner interface {
	Run(ctx context.Context) error
}

// runFunc is a component that is a function.
type runFunc func(ctx context.Context) error

func (f runFunc) Run(ctx context.Context) error { return f(ctx) }

// startComponents starts the submitter, the syncer, the ingester and the
// agents' supervisor in goroutines that wg waits for. notify wakes the
// outbox relay of this process: the failover controller calls it when it
// queues a runnable, so the submitter hears of it at once. The submitter
// and the syncer ask identities' policy, reloaded as its file changes.
func startComponents(ctx context.Context, wg *sync.WaitGroup, db *store.Store, sealer *seal.Sealer, streams *stream.Client, identities *auth.Identities, metrics prometheus.Registerer, log *slog.Logger, notify func()) error {
	interp, err := health.New(nil)
	if err != nil {
		return err
	}
	ingester, err := inventory.New(inventory.Config{Store: db, Stream: streams, Logger: log.With("component", "ingester"), Health: interp.InterpretJSON,
		Fingerprint: sealer.Fingerprint})
	if err != nil {
		return err
	}
	components := map[string]runner{
		"submitter": submitter.New(submitter.Config{Store: db, Sealer: sealer, Stream: streams, Registerer: metrics, Logger: log.With("component", "submitter"), Policy: identities}),
		"syncer":    syncer.New(syncer.Config{Store: db, Sealer: sealer, Stream: streams, Identity: "purser-up", Logger: log.With("component", "syncer"), Policy: identities}),
		"ingester":  ingester,
		"agents":    &agents{store: db, clusters: clusters.NewCache(sealer), stream: streams, log: log.With("component", "agent")},
		"controller": runFunc(func(ctx context.Context) error {
			return controller.Run(ctx, controller.Config{Store: db, Sealer: sealer, Registerer: metrics, Logger: log.With("component", "controller"),
				Failover: failover.Config{Notify: notify}})
		}),
	}
	for name, c := range components {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Run(ctx); err != nil && ctx.Err() == nil {
				log.Error("component stopped", "component", name, "err", err)
			}
		}()
	}
	return nil
}

// agents runs one agent beside every registered cluster, starting and
// stopping them as clusters are registered, changed and removed.
type agents struct {
	store    *store.Store
	clusters *clusters.Cache
	stream   *stream.Client
	log      *slog.Logger
}

// agentsPoll is how often the registered clusters are listed again.
const agentsPoll = 3 * time.Second

func (a *agents) Run(ctx context.Context) error {
	type running struct {
		version int64 // the cluster row's resourceVersion the agent was started for
		cancel  context.CancelFunc
		done    chan struct{}
	}
	live := map[string]*running{}
	stop := func(name string) {
		r := live[name]
		r.cancel()
		<-r.done
		delete(live, name)
	}
	defer func() {
		for name := range live {
			stop(name)
		}
	}()
	for {
		var rows []*store.Cluster
		err := a.store.Read(ctx, func(tx *store.Tx) error {
			var err error
			rows, err = tx.ListClusters(ctx)
			return err
		})
		if err != nil && ctx.Err() == nil {
			a.log.Warn("list clusters", "err", err)
		}
		seen := map[string]bool{}
		for _, c := range rows {
			seen[c.Name] = true
			if r, ok := live[c.Name]; ok && r.version == c.ResourceVersion {
				continue
			} else if ok {
				stop(c.Name) // its kubeconfig or labels changed
			}
			cfg, err := a.clusters.RESTConfig(c)
			if err != nil {
				a.log.Warn("cannot start agent", "cluster", c.Name, "err", err)
				continue
			}
			// The agent names its cluster in its log lines itself.
			ag, err := agent.New(agent.Config{Cluster: c.Name, RESTConfig: cfg, Stream: a.stream, Logger: a.log})
			if err != nil {
				a.log.Warn("cannot start agent", "cluster", c.Name, "err", err)
				continue
			}
			actx, cancel := context.WithCancel(ctx)
			r := &running{version: c.ResourceVersion, cancel: cancel, done: make(chan struct{})}
			live[c.Name] = r
			go func() {
				defer close(r.done)
				if err := ag.Run(actx); err != nil && actx.Err() == nil {
					a.log.Error("agent stopped", "cluster", c.Name, "err", err)
				}
			}()
		}
		for name := range live {
			if !seen[name] {
				stop(name)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(agentsPoll):
		}
	}
}
