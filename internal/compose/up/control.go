package up

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/purser-io/purser/internal/sandbox"
)

// sandboxControl answers the sandbox's control socket (purser sandbox
// stop, start, status, flink fail): it takes a cluster down as a power cut
// would, with what runs beside it here (its agent, its Flink operator
// simulator and the simulated jobs), and brings it back in a machine's
// boot order, so that a person can watch purser notice and move its work.
type sandboxControl struct {
	ctx    context.Context // the sandbox's lifetime: a start runs to its end even if the caller leaves
	fleet  *sandbox.Fleet
	flink  *flinkFarm // nil without --flink
	agents *agents
	out    io.Writer
	log    *slog.Logger

	mu      sync.Mutex // one stop or start at a time
	stopped map[string]bool
}

var _ sandbox.Control = (*sandboxControl)(nil)

func (s *sandboxControl) cluster(name string) (*sandbox.Cluster, error) {
	for _, c := range s.fleet.Clusters() {
		if c.Name() == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w %q (the sandbox has %s)", sandbox.ErrNoCluster, name, strings.Join(clusterNames(s.fleet), ", "))
}

func (s *sandboxControl) say(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintln(s.out, msg)
	s.log.Warn("sandbox control", "event", msg)
}

// StopCluster stops the agent first, so that its last heartbeat found the
// kube-apiserver answering (from which purser knows that the agent, cut
// off, would have fenced its copies: AtMostOne work moves once the lease
// and the margin have passed; docs/failover.md), then the simulator, then
// every process of the cluster, dependents first. The data stays.
func (s *sandboxControl) StopCluster(_ context.Context, name string) (string, error) {
	c, err := s.cluster(name)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped[name] {
		return "", fmt.Errorf("%s is %w: it is already stopped (purser sandbox start %s brings it back)", name, sandbox.ErrWrongState, name)
	}
	start := time.Now()
	s.agents.hold(name)
	if s.flink != nil {
		s.flink.stopCluster(name)
	}
	c.Stop()
	s.stopped[name] = true
	what := "its agent"
	if s.flink != nil {
		what += ", its Flink operator simulator with its jobs"
	}
	s.say("%s: stopped on request (%s and its processes) in %s; `purser sandbox start %s` brings it back", name, what, time.Since(start).Round(100*time.Millisecond), name)
	return fmt.Sprintf("%s stopped: %s and its kube-apiserver, etcd and controllers no longer run (data kept). "+
		"purser marks it not Ready after its failed probes and moves its work once it may (purser get clusters, purser get runnables -A); "+
		"purser sandbox start %s brings it back", name, what, name), nil
}

// StartCluster brings a stopped cluster back: etcd and the kube-apiserver,
// then its agent (which fences on return what it should no longer run,
// before anything runs it), then the controllers and nodes, then the
// simulator.
func (s *sandboxControl) StartCluster(_ context.Context, name string) (string, error) {
	c, err := s.cluster(name)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped[name] {
		return "", fmt.Errorf("%s is %w: it is running (purser sandbox stop %s takes it down)", name, sandbox.ErrWrongState, name)
	}
	start := time.Now()
	ctx := s.ctx
	if err := c.PowerOn(ctx, func(context.Context) error {
		s.agents.release(name)
		return nil
	}); err != nil {
		return "", fmt.Errorf("start %s: %w (purser sandbox start %s tries again)", name, err, name)
	}
	if s.flink != nil {
		if err := s.flink.start(ctx, c); err != nil {
			return "", fmt.Errorf("start %s: %w", name, err)
		}
	}
	delete(s.stopped, name)
	s.say("%s: started again on request in %s", name, time.Since(start).Round(100*time.Millisecond))
	return fmt.Sprintf("%s is running again; purser marks it Ready after its probes pass (purser get clusters)", name), nil
}

func (s *sandboxControl) Clusters() []sandbox.ClusterStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sandbox.ClusterStatus
	for _, name := range clusterNames(s.fleet) {
		out = append(out, sandbox.ClusterStatus{Name: name, Running: !s.stopped[name]})
	}
	return out
}

func (s *sandboxControl) FlinkFault(_ context.Context, namespace, name, fault, cluster string) (string, error) {
	if s.flink == nil {
		return "", fmt.Errorf("%w: this sandbox has no Flink operator simulator (start purser up with --flink)", sandbox.ErrWrongState)
	}
	if cluster != "" {
		if _, err := s.cluster(cluster); err != nil {
			return "", err
		}
	}
	msg, err := s.flink.fault(namespace, name, fault, cluster)
	if err == nil {
		s.say("%s", msg)
	}
	return msg, err
}
