package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/hub/stream"
)

// The agent reports which kinds its cluster serves and their scope, so
// that the API, which reads only the database, can tell a cluster-scoped
// kind from a namespaced one before it accepts an object (scope is part of
// authorization). The list comes from the discovery the labelled watches
// already do; it is written to stream.KindsBucket only when it changes.

// servedKinds turns the server's preferred resources into one entry per
// kind: subresources (jobs/status) share their parent's kind and are left
// out. Sorted, so that equal discoveries encode equally.
func servedKinds(lists []*metav1.APIResourceList) []stream.ServedKind {
	seen := map[schema.GroupKind]bool{}
	var out []stream.ServedKind
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			gk := schema.GroupKind{Group: gv.Group, Kind: r.Kind}
			if strings.Contains(r.Name, "/") || r.Kind == "" || seen[gk] {
				continue
			}
			seen[gk] = true
			out = append(out, stream.ServedKind{Group: gv.Group, Version: gv.Version, Kind: r.Kind, Namespaced: r.Namespaced})
		}
	}
	sortKinds(out)
	return out
}

func sortKinds(k []stream.ServedKind) {
	slices.SortFunc(k, func(a, b stream.ServedKind) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return strings.Compare(a.Kind, b.Kind)
	})
}

// kindsRefresh is how often the served kinds are written again even when
// they did not change, so that a bucket lost with NATS's data fills again
// without a restart of the agents.
const kindsRefresh = 10 * time.Minute

// reportKinds publishes the served kinds when they differ from what was
// last acknowledged, or that is older than kindsRefresh. Groups whose
// discovery failed this time keep the kinds last reported for them: a
// failed group says nothing of its kinds. A write that fails is tried
// again on the next discovery pass.
func (a *Agent) reportKinds(ctx context.Context, lists []*metav1.APIResourceList, failed map[string]bool) {
	kinds := servedKinds(lists)
	a.mu.Lock()
	last, at := a.reportedKinds, a.reportedKindsAt
	a.mu.Unlock()
	if len(failed) > 0 {
		for _, k := range last {
			if failed[k.Group] {
				kinds = append(kinds, k)
			}
		}
		sortKinds(kinds)
	}
	if last != nil && slices.Equal(kinds, last) && time.Since(at) < kindsRefresh {
		return
	}
	data, err := json.Marshal(stream.ServedKinds{Cluster: a.cfg.Cluster, Time: time.Now().UTC(), Kinds: kinds})
	if err != nil {
		a.log.Error("encode served kinds", "error", err)
		return
	}
	if err := a.putKinds(ctx, data); err != nil {
		if ctx.Err() == nil {
			a.log.Warn("report served kinds; will retry", "error", err)
		}
		return
	}
	a.mu.Lock()
	a.reportedKinds, a.reportedKindsAt = kinds, time.Now()
	a.mu.Unlock()
	if !slices.Equal(kinds, last) {
		a.log.Info("reported the kinds the cluster serves", "kinds", len(kinds))
	}
}

func (a *Agent) putKinds(ctx context.Context, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	kv, err := a.cfg.Stream.JetStream().KeyValue(ctx, stream.KindsBucket)
	if err != nil {
		return fmt.Errorf("bind bucket %s: %w", stream.KindsBucket, err)
	}
	_, err = kv.Put(ctx, a.cfg.Cluster, data)
	return err
}

// OptInKinds are the kinds a cluster tracks only when it asks
// (Config.OptIn, the Cluster's spec.inventory.kinds), by the name it asks
// with: Pods (trimmed to what `kubectl get pods` and the owner chains
// read, see Trim) and core v1 Events, what `kubectl get events` lists.
var OptInKinds = map[string]schema.GroupVersionKind{
	"Pod":   {Version: "v1", Kind: "Pod"},
	"Event": {Version: "v1", Kind: "Event"},
}

// withOptIn adds the opted-in kinds to kinds, once each; a name not in
// OptInKinds is refused.
func withOptIn(kinds []schema.GroupVersionKind, optIn []string) ([]schema.GroupVersionKind, error) {
	out := slices.Clone(kinds)
	for _, name := range optIn {
		gvk, ok := OptInKinds[name]
		if !ok {
			return nil, fmt.Errorf("kind %q cannot be opted in: the agent tracks Pod and Event on request", name)
		}
		if !slices.Contains(out, gvk) {
			out = append(out, gvk)
		}
	}
	return out, nil
}
