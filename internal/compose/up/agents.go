package up

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/purser-io/purser/internal/compose"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// runner is a built component.
type runner interface {
	Run(ctx context.Context) error
}

// runComponent runs c until ctx is done and says why it stopped before.
func runComponent(ctx context.Context, log *slog.Logger, name string, c runner) {
	if err := c.Run(ctx); err != nil && ctx.Err() == nil {
		log.Error("component stopped", "component", name, "err", err)
	}
}

// startComponents builds the submitter, the syncer, the ingester, the
// controller and the agents' supervisor on hub, then runs them until
// stop, which waits for them. notify wakes the outbox relay of this
// process: the failover controller calls it when it queues a runnable, so
// the submitter hears of it at once.
func startComponents(ctx context.Context, hub *compose.Hub, c compose.Config, notify func()) (stop func(), ag *agents, err error) {
	c.Controller.Failover.Notify = notify
	builds := []struct {
		name  string
		build func() (*compose.Component, error)
	}{
		{"submitter", func() (*compose.Component, error) { return compose.Submitter(hub, c.Submitter) }},
		{"syncer", func() (*compose.Component, error) { return compose.Syncer(hub, c.Syncer) }},
		{"ingester", func() (*compose.Component, error) { return compose.Ingester(hub, c.Ingester) }},
		{"controller", func() (*compose.Component, error) { return compose.Controller(hub, c.Controller) }},
	}
	ag = &agents{hub: hub, clusters: clusters.NewCache(hub.Sealer), log: hub.Logger.With("component", "agent")}
	components := map[string]runner{"agents": ag}
	for _, b := range builds {
		if components[b.name], err = b.build(); err != nil {
			return nil, nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for name, c := range components {
		wg.Go(func() { runComponent(ctx, hub.Logger, name, c) })
	}
	return func() {
		cancel()
		wg.Wait()
	}, ag, nil
}

// agents runs one agent beside every registered cluster, starting and
// stopping them as clusters are registered, changed and removed.
// A cluster held down (sandbox stop) has no agent until it is let up
// again, as a cluster that lost power takes its agent with it.
type agents struct {
	hub      *compose.Hub
	clusters *clusters.Cache
	log      *slog.Logger

	// mu serializes the passes of sync; live and ctx are theirs.
	mu   sync.Mutex
	ctx  context.Context // Run's: the agents' lifetime
	live map[string]*runningAgent
	down map[string]bool // clusters held down
}

// agentsPoll is how often the registered clusters are listed again.
const agentsPoll = 3 * time.Second

// runningAgent is an agent started for one version of its cluster's row.
type runningAgent struct {
	version int64 // the cluster row's resourceVersion the agent was started for
	cancel  context.CancelFunc
	done    chan struct{}
}

func (a *agents) Run(ctx context.Context) error {
	a.mu.Lock()
	a.ctx, a.live = ctx, map[string]*runningAgent{}
	if a.down == nil {
		a.down = map[string]bool{}
	}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		for name := range a.live {
			stopAgent(a.live, name)
		}
		a.ctx = nil
	}()
	reconcile.Every(ctx, agentsPoll, func(context.Context) { a.pass() })
	return nil
}

// hold stops the agent of cluster name, if it runs, and keeps it stopped
// until release; it returns once the agent has stopped.
func (a *agents) hold(name string) {
	a.mu.Lock()
	if a.down == nil {
		a.down = map[string]bool{}
	}
	a.down[name] = true
	a.mu.Unlock()
	a.pass()
}

// release lets cluster name have its agent again and starts it at once.
func (a *agents) release(name string) {
	a.mu.Lock()
	delete(a.down, name)
	a.mu.Unlock()
	a.pass()
}

// pass runs sync once Run has started, and not after it ended.
func (a *agents) pass() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctx == nil || a.ctx.Err() != nil {
		return
	}
	a.sync(a.ctx, a.live)
}

// sync starts an agent for every cluster that has none or whose row
// changed, and stops those of the clusters removed or held down. The
// caller holds mu.
func (a *agents) sync(ctx context.Context, live map[string]*runningAgent) {
	for name := range live {
		if a.down[name] {
			stopAgent(live, name)
		}
	}
	var rows []*store.Cluster
	err := a.hub.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		rows, err = tx.Clusters().List(ctx)
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("list clusters", "err", err)
		}
		return
	}
	seen := map[string]bool{}
	for _, c := range rows {
		if a.down[c.Name] {
			continue // stopped below, if it runs
		}
		seen[c.Name] = true
		if r, ok := live[c.Name]; ok && r.version == c.ResourceVersion {
			continue
		} else if ok {
			stopAgent(live, c.Name) // its kubeconfig or labels changed
		}
		rc, err := a.clusters.RESTConfig(c)
		if err != nil {
			a.log.Warn("cannot start agent", "cluster", c.Name, "err", err)
			continue
		}
		ag, err := compose.Agent(a.hub, compose.AgentConfig{Cluster: c.Name, RESTConfig: rc})
		if err != nil {
			a.log.Warn("cannot start agent", "cluster", c.Name, "err", err)
			continue
		}
		actx, cancel := context.WithCancel(ctx)
		r := &runningAgent{version: c.ResourceVersion, cancel: cancel, done: make(chan struct{})}
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
			stopAgent(live, name)
		}
	}
}

// stopAgent stops the agent of cluster name and waits for it.
func stopAgent(live map[string]*runningAgent, name string) {
	r := live[name]
	r.cancel()
	<-r.done
	delete(live, name)
}
