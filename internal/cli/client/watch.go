package client

import (
	"context"
	"encoding/json"
	"time"

	"github.com/purser-io/purser/internal/platform/reconcile"
)

// WatchInterval is how often a watch lists again.
const WatchInterval = time.Second

// Watch serves `get -w`: it calls list every interval and hands emit the
// objects of the first answer, then each object that is new or changed
// since the previous answer, and the last state of each that is gone.
// purser's lists have no change feed, so a watch compares level-wise, as
// the inventory's server-side watch does; a change that comes and goes
// between two lists is not seen, the state after it is. It returns when
// ctx ends (nil) or a list fails.
func Watch(ctx context.Context, interval time.Duration, list func(context.Context) ([]Object, error), emit func([]Object) error) error {
	seen := map[string]seenObject{}
	first := true
	err := reconcile.Poll(ctx, interval, func(ctx context.Context) (bool, error) {
		items, err := list(ctx)
		if ctx.Err() != nil {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		var changed []Object
		now := make(map[string]seenObject, len(items))
		for _, it := range items {
			k, fp := watchKey(it), fingerprint(it)
			now[k] = seenObject{obj: it, fp: fp}
			if old, ok := seen[k]; first || !ok || old.fp != fp {
				changed = append(changed, it)
			}
		}
		for k, old := range seen {
			if _, ok := now[k]; !ok {
				changed = append(changed, old.obj)
			}
		}
		seen = now
		if len(changed) > 0 || first {
			if err := emit(changed); err != nil {
				return false, err
			}
		}
		first = false
		return false, nil
	})
	if ctx.Err() != nil {
		return nil // the watch ends with its context
	}
	return err
}

type seenObject struct {
	obj Object
	fp  string
}

func watchKey(o Object) string {
	md, _ := o["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	kind, _ := o["kind"].(string)
	return kind + "/" + ns + "/" + name
}

// fingerprint is the object's content without what changes on its own
// every few seconds (an agent's heartbeat times), so that a watch of the
// clusters prints a row when something about a cluster changes, not on
// every heartbeat.
func fingerprint(o Object) string {
	cp := make(Object, len(o))
	for k, v := range o {
		cp[k] = v
	}
	if st, ok := o["status"].(map[string]any); ok {
		s := make(map[string]any, len(st))
		for k, v := range st {
			if k != "agent" {
				s[k] = v
			}
		}
		cp["status"] = s
	}
	data, _ := json.Marshal(cp)
	return string(data)
}
