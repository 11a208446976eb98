package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/purser-io/purser/api/v1alpha1"
)

// labelDeployable is the label the syncer puts on every object it applies
// (syncer.LabelDeployable; a test keeps the two equal). The agent does not
// import the syncer, which brings the database with it.
const labelDeployable = "purser.io/deployable"

// purserLabels mark the objects purser put in a cluster: a runnable's
// object carries the runnable's uid, a deployable's the deployable's. A
// label selector cannot say "this label or that one", so a kind tracked for
// purser's objects has one watch per label, each selecting on the label's
// presence and filtered by the API server. An object carrying both is in
// both caches: its events are published twice under one message id (the
// stream keeps one) and snapshots list it once.
var purserLabels = []string{v1alpha1.LabelRunnableUID, labelDeployable}

// skipLabelled are resources never watched for purser's labels: Events are
// served by two groups (the same objects twice), change all the time, and
// purser neither creates nor labels them.
var skipLabelled = map[schema.GroupResource]bool{
	{Resource: "events"}:                         true,
	{Group: "events.k8s.io", Resource: "events"}: true,
}

// resource is a kind as the API server serves it.
type resource struct {
	gvk schema.GroupVersionKind
	gvr schema.GroupVersionResource
}

// labelledResources picks, from the server's preferred resources, those to
// watch for purser's labels: every kind that can be listed and watched,
// except subresources, skipLabelled and the kinds configured for full
// tracking (in any version: a configured CRD not installed yet is not
// watched twice once it is).
func labelledResources(lists []*metav1.APIResourceList, configured []schema.GroupVersionKind) map[schema.GroupKind]resource {
	full := map[schema.GroupKind]bool{}
	for _, gvk := range configured {
		full[gvk.GroupKind()] = true
	}
	out := map[schema.GroupKind]resource{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			gk := schema.GroupKind{Group: gv.Group, Kind: r.Kind}
			switch {
			case strings.Contains(r.Name, "/"),
				!slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch"),
				skipLabelled[schema.GroupResource{Group: gv.Group, Resource: r.Name}],
				full[gk]:
				continue
			}
			out[gk] = resource{gvk: gv.WithKind(r.Kind), gvr: gv.WithResource(r.Name)}
		}
	}
	return out
}

// discoverLabelled keeps one labelled watch for each resource that
// labelledResources picks from the server's preferred versions: it starts
// the new ones (a CRD installed since the last pass), moves a kind whose
// preferred version changed, and stops those no longer served. A group
// whose discovery failed keeps its watches until a pass says otherwise.
func (a *Agent) discoverLabelled(ctx context.Context, wg *sync.WaitGroup) {
	lists, err := a.disc.ServerPreferredResourcesWithContext(ctx)
	failed := map[string]bool{}
	if err != nil {
		var partial *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &partial) {
			if ctx.Err() == nil {
				a.log.Warn("discovery failed; will retry", "error", err)
			}
			return
		}
		for gv := range partial.Groups {
			failed[gv.Group] = true
		}
		a.log.Debug("discovery of some groups failed; will retry", "error", err)
	}
	a.reportKinds(ctx, lists, failed)
	want := labelledResources(lists, a.kinds())
	var refused []string
	for gk, r := range want {
		if !a.access.mayWatch(ctx, r.gvr.GroupResource()) {
			delete(want, gk) // and a watch of it stops, as for a kind no longer served
			refused = append(refused, r.gvr.GroupResource().String())
		}
	}
	if ctx.Err() != nil {
		return
	}
	a.access.report(a.log, refused)

	a.mu.Lock()
	defer a.mu.Unlock()
	for gk, w := range a.labelled {
		r, served := want[gk]
		if served && r == (resource{gvk: w.gvk, gvr: w.gvr}) {
			continue
		}
		if !served && failed[gk.Group] {
			continue
		}
		w.stop()
		delete(a.labelled, gk)
		a.log.Info("stopped watching purser's objects", "kind", w.gvk.String())
	}
	started := 0
	for gk, r := range want {
		if _, ok := a.labelled[gk]; ok || ctx.Err() != nil {
			continue
		}
		wctx, stop := context.WithCancel(ctx)
		w := a.newWatch(wctx, r.gvk, r.gvr, purserLabels)
		w.stop = stop
		a.labelled[gk] = w
		w.run(wctx, wg)
		started++
		a.log.Debug("watching purser's objects", "kind", r.gvk.String(), "resource", r.gvr.Resource)
	}
	if started > 0 {
		a.log.Info("watching purser's objects of more kinds", "started", started, "labelledKinds", len(a.labelled))
	}
}
