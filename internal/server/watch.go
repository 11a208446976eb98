package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/purser-io/purser/internal/store"
)

// Watch limits: a watch re-reads its whole selection every watchPoll and
// reports what changed, so it is offered for selections of at most
// watchMax records; a wider one is refused with a hint to narrow it.
const (
	watchPoll      = time.Second
	watchMax       = 10_000
	watchKeepalive = 15 * time.Second
)

// WatchEvent is one Server-Sent Event of an inventory watch: its event
// name is the type (ADDED, MODIFIED, DELETED), its data this JSON.
type WatchEvent struct {
	Type string        `json:"type"`
	Item InventoryItem `json:"item"`
}

// watchInventory serves GET /api/v1/inventory?watch=true as Server-Sent
// Events: every record of the selection as ADDED, then each change as it
// reaches the database. It diffs the selection level-wise rather than
// tailing a log, so nothing it reports depends on having seen every
// intermediate write, and a reconnecting client simply starts again.
func (s *Server) watchInventory(w http.ResponseWriter, r *http.Request, f store.InventoryFilter) error {
	flusher, ok := w.(http.Flusher)
	if !ok {
		return errBadRequest("this connection cannot stream; watch needs HTTP/1.1 or HTTP/2 without buffering")
	}
	f.Limit, f.Continue = watchMax, ""
	read := func(ctx context.Context) (map[string]InventoryItem, error) {
		var rows []store.InventoryRow
		var next string
		var fresh map[string]store.AgentFreshness
		err := s.cfg.Store.Read(ctx, func(tx *store.Tx) error {
			var err error
			if rows, next, err = tx.ListInventory(ctx, f); err != nil {
				return err
			}
			fresh, err = tx.ListAgentFreshness(ctx)
			return err
		})
		if err != nil {
			return nil, err
		}
		if next != "" {
			return nil, errBadRequest("the selection holds more than %d records; narrow it (cluster, namespace, kind, labelSelector) to watch it", watchMax)
		}
		out := make(map[string]InventoryItem, len(rows))
		current := map[string]*time.Time{}
		for c, a := range fresh {
			current[c] = agentStatus(a, s.now()).CurrentUntil
		}
		for _, row := range rows {
			out[row.Cluster+"/"+row.UID] = inventoryItem(row, current[row.Cluster])
		}
		return out, nil
	}

	ctx := r.Context()
	seen, err := read(ctx)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	send := func(typ string, it InventoryItem) error {
		data, err := json.Marshal(WatchEvent{Type: typ, Item: it})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data)
		return err
	}
	for _, it := range seen {
		if err := send("ADDED", it); err != nil {
			return nil // the client went away
		}
	}
	flusher.Flush()

	poll := time.NewTicker(watchPoll)
	defer poll.Stop()
	lastWrite := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
		}
		now, err := read(ctx)
		if err != nil {
			// The stream has begun: say why it ends, as a comment, and end
			// it; the client reconnects.
			fmt.Fprintf(w, ": watch ended: %v\n\n", err)
			flusher.Flush()
			return nil
		}
		wrote := false
		for k, it := range now {
			prev, ok := seen[k]
			switch {
			case !ok:
				err = send("ADDED", it)
			// A change of the record is an event, not one of seenAt,
			// which moves with every heartbeat of a fresh cluster:
			// clients follow that from the cluster's freshness.
			case prev.ResourceVersion != it.ResourceVersion || prev.Health != it.Health || prev.Phase != it.Phase:
				err = send("MODIFIED", it)
			default:
				continue
			}
			if err != nil {
				return nil
			}
			wrote = true
		}
		for k, it := range seen {
			if _, ok := now[k]; !ok {
				if send("DELETED", it) != nil {
					return nil
				}
				wrote = true
			}
		}
		seen = now
		if !wrote && time.Since(lastWrite) > watchKeepalive {
			// A comment keeps proxies from closing an idle stream.
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return nil
			}
			wrote = true
		}
		if wrote {
			lastWrite = time.Now()
			flusher.Flush()
		}
	}
}

// inventoryItem is a record as the API shows it; currentUntil is its
// cluster's (nil when never current).
func inventoryItem(row store.InventoryRow, currentUntil *time.Time) InventoryItem {
	seen := row.ObservedAt
	if currentUntil != nil && currentUntil.After(seen) {
		seen = *currentUntil
	}
	return InventoryItem{
		Cluster: row.Cluster, APIVersion: row.APIVersion, Kind: row.Kind, Namespace: row.Namespace, Name: row.Name,
		UID: row.UID, ResourceVersion: row.ResourceVersion, Labels: row.Labels, Health: row.Health, Phase: row.Phase,
		ObservedAt: row.ObservedAt, SeenAt: seen, Object: row.Object,
	}
}
