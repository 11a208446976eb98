package agent

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/hub/stream"
)

// What the hub asks of the agent (stream.AgentSettings, written by the API
// with each change of the Cluster's spec.inventory.kinds) is read from the
// cluster's key of stream.AgentSettingsBucket at every discovery pass: one
// read per DiscoveryInterval, and a change is followed within one. The
// kinds asked for are watched beside the configured ones; a kind no
// longer asked for stops being watched, and the next snapshot lists it
// empty (as of the last version its watch saw), so that the ingester
// removes its records rather than keep them unrefreshed.

// settingsTimeout bounds one read of the settings.
const settingsTimeout = 5 * time.Second

// refreshSettings reads the cluster's settings. A missing key asks for
// nothing; a read that fails (the stream away, a hub without the bucket)
// keeps what was asked before.
func (a *Agent) refreshSettings(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, settingsTimeout)
	defer cancel()
	var asked []string
	kv, err := a.cfg.Stream.JetStream().KeyValue(ctx, stream.AgentSettingsBucket)
	if err == nil {
		var e jetstream.KeyValueEntry
		e, err = kv.Get(ctx, a.cfg.Cluster)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			err = nil
		case err == nil:
			var s stream.AgentSettings
			if err = json.Unmarshal(e.Value(), &s); err == nil {
				asked = s.Kinds
			}
		}
	}
	if err != nil {
		if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			a.log.Debug("read the agent's settings; keeping the kinds asked before", "error", err)
		}
		return
	}
	var kinds []schema.GroupVersionKind
	var unknown []string
	for _, name := range asked {
		gvk, ok := OptInKinds[name]
		if !ok {
			unknown = append(unknown, name)
			continue
		}
		if !slices.Contains(a.cfg.Kinds, gvk) && !slices.Contains(kinds, gvk) {
			kinds = append(kinds, gvk)
		}
	}
	if len(unknown) > 0 {
		// The API validates the names; a newer hub may know more kinds
		// than this agent does.
		a.log.Warn("the hub asks for kinds this agent cannot track; ignored", "kinds", unknown)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if slices.Equal(kinds, a.asked) {
		return
	}
	if len(asked) == 0 {
		a.log.Info("the hub asks for no kinds beside the configured ones")
	} else {
		a.log.Info("the hub asks for kinds beside the configured ones", "kinds", asked)
	}
	a.asked = kinds
	for gvk, w := range a.watched {
		if slices.Contains(a.cfg.Kinds, gvk) || slices.Contains(kinds, gvk) {
			continue
		}
		rv, _, ok := w.list()
		w.stop()
		delete(a.watched, gvk)
		// A kind watched for purser's labels (Pods) is listed again by
		// that watch, whose snapshots remove the other records; one never
		// watched so (Events) is listed empty once.
		if ok && skipLabelled[w.gvr.GroupResource()] {
			a.dropped[gvk] = rv
		}
		a.log.Info("stopped watching a kind no longer asked for", "kind", gvk.String())
	}
	for _, gvk := range kinds {
		delete(a.dropped, gvk)
	}
}

// kinds is what the agent tracks in full now: the configured kinds and
// those the hub asks for.
func (a *Agent) kinds() []schema.GroupVersionKind {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append(slices.Clone(a.cfg.Kinds), a.asked...)
}

// droppedLists are the empty lists of the kinds no longer watched, for the
// next snapshot.
func (a *Agent) droppedLists() []stream.KindList {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []stream.KindList
	for gvk, rv := range a.dropped {
		out = append(out, stream.KindList{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, ListResourceVersion: rv, Items: [][2]string{}})
	}
	return out
}

// forgetDropped clears the dropped kinds a published snapshot listed.
func (a *Agent) forgetDropped(lists []stream.KindList) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for gvk := range a.dropped {
		if slices.ContainsFunc(lists, func(l stream.KindList) bool {
			return l.APIVersion == gvk.GroupVersion().String() && l.Kind == gvk.Kind
		}) {
			delete(a.dropped, gvk)
		}
	}
}
