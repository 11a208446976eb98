package farm

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// PrimaryWatch asks every powered DC's PostgreSQL node, from inside its DC
// and so across any partition of the WAN, whether it accepts writes (is
// not in recovery), a round every interval. Two nodes that accept writes
// in the same round are two primaries: Patroni's own rule (a primary that
// cannot renew its leader key demotes within loop_wait + 2 × retry_timeout,
// before the key's ttl runs out) says that never happens, and the soak
// holds it to that. It also dates each node's promotion, which splits a
// failover's time between Patroni and the clients.
type PrimaryWatch struct {
	f        *DCFarm
	interval time.Duration

	mu       sync.Mutex
	conns    map[*DC]*pgx.Conn
	writable map[*DC]bool
	promoted []Promotion
	twice    []string
	rounds   int

	stop func()
	done chan struct{}
}

// Promotion is a node seen accepting writes where the round before it did
// not (or at the watch's first round).
type Promotion struct {
	DC *DC
	At time.Time
}

// WatchPrimaries starts a PrimaryWatch; Stop ends it.
func (f *DCFarm) WatchPrimaries(ctx context.Context, interval time.Duration) *PrimaryWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &PrimaryWatch{f: f, interval: interval, conns: map[*DC]*pgx.Conn{}, writable: map[*DC]bool{},
		stop: cancel, done: make(chan struct{})}
	go w.run(ctx)
	return w
}

// Stop ends the watch and closes its connections.
func (w *PrimaryWatch) Stop() {
	w.stop()
	<-w.done
}

// TwoPrimaries lists the rounds in which more than one node accepted
// writes.
func (w *PrimaryWatch) TwoPrimaries() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.twice...)
}

// Rounds is how many rounds asked every powered DC.
func (w *PrimaryWatch) Rounds() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rounds
}

// PromotedAfter is the first node seen to start accepting writes at or
// after t, other than in lost; ok is false when none has.
func (w *PrimaryWatch) PromotedAfter(t time.Time, lost *DC) (Promotion, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.promoted {
		if !p.At.Before(t) && p.DC != lost {
			return p, true
		}
	}
	return Promotion{}, false
}

func (w *PrimaryWatch) run(ctx context.Context) {
	defer close(w.done)
	defer func() {
		for dc, c := range w.conns {
			_ = c.Close(context.Background())
			delete(w.conns, dc)
		}
	}()
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		w.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// round asks every powered DC's node at once; a node that does not answer
// within the interval counts as not accepting writes this round (it is
// dead, starting, or its DC has just lost power).
func (w *PrimaryWatch) round(ctx context.Context) {
	type answer struct {
		dc       *DC
		writable bool
		err      error
	}
	dcs := w.f.powered()
	answers := make(chan answer, len(dcs))
	var wg sync.WaitGroup
	for _, dc := range dcs {
		w.mu.Lock()
		conn := w.conns[dc]
		w.mu.Unlock()
		wg.Go(func() {
			qctx, cancel := context.WithTimeout(ctx, w.interval)
			defer cancel()
			writable, c, err := askWritable(qctx, dc, conn)
			w.mu.Lock()
			if err != nil {
				delete(w.conns, dc)
			} else {
				w.conns[dc] = c
			}
			w.mu.Unlock()
			answers <- answer{dc, writable, err}
		})
	}
	wg.Wait()
	close(answers)
	now := time.Now()
	var primaries []string
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rounds++
	seen := map[*DC]bool{}
	for a := range answers {
		seen[a.dc] = true
		writable := a.err == nil && a.writable
		if writable {
			primaries = append(primaries, a.dc.Name)
			if !w.writable[a.dc] {
				w.promoted = append(w.promoted, Promotion{DC: a.dc, At: now})
			}
		}
		w.writable[a.dc] = writable
	}
	for dc := range w.writable {
		if !seen[dc] {
			w.writable[dc] = false // no power: nothing of it runs
		}
	}
	if len(primaries) > 1 {
		w.twice = append(w.twice, fmt.Sprintf("%s: %v accept writes", now.UTC().Format("15:04:05.000"), primaries))
	}
}

// askWritable asks dc's node whether it is out of recovery, on conn when
// there is one, else on a new connection dialled from inside dc.
func askWritable(ctx context.Context, dc *DC, conn *pgx.Conn) (bool, *pgx.Conn, error) {
	if conn == nil {
		cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://purser@%s:%d/postgres?sslmode=disable", dc.Addr, postgresPort))
		if err != nil {
			return false, nil, err
		}
		cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dc.NS.Dial(ctx, network, addr)
		}
		if conn, err = pgx.ConnectConfig(ctx, cfg); err != nil {
			return false, nil, err
		}
	}
	var inRecovery bool
	if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&inRecovery); err != nil {
		_ = conn.Close(context.Background())
		return false, nil, err
	}
	return !inRecovery, conn, nil
}

// DescribeDatabase says, in one line, what every powered DC's node is
// doing: its Patroni role, and on the node that accepts writes the
// sessions by what they wait for and each standby's replication state.
// The DC soak logs it while writes stall, so that a stall names its cause.
func (f *DCFarm) DescribeDatabase(ctx context.Context) string {
	var parts []string
	roles := map[string]string{}
	for _, dc := range f.powered() {
		if f.WAN.Isolated(dc.Index) {
			continue // a cut DC's Patroni sees the cluster as it was
		}
		members, err := f.PatroniCluster(ctx, dc)
		if err != nil {
			continue
		}
		for _, m := range members {
			roles[m.Name] = m.Role + "/" + m.State
		}
		break
	}
	parts = append(parts, fmt.Sprintf("patroni %v", roles))
	for _, dc := range f.powered() {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		desc, err := describeNode(qctx, dc)
		cancel()
		if err != nil {
			parts = append(parts, fmt.Sprintf("%s: %v", dc.Name, err))
			continue
		}
		if desc != "" {
			parts = append(parts, dc.Name+": "+desc)
		}
	}
	return strings.Join(parts, "; ")
}

// describeNode is the waits of the node's sessions and its standbys, when
// it accepts writes; "" when it is a standby.
func describeNode(ctx context.Context, dc *DC) (string, error) {
	writable, conn, err := askWritable(ctx, dc, nil)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if !writable {
		return "", nil
	}
	var b strings.Builder
	rows, err := conn.Query(ctx, `SELECT coalesce(wait_event_type || ':' || wait_event, 'cpu'), state, count(*),
		coalesce(max(extract(epoch FROM now() - xact_start)), 0)::float8
		FROM pg_stat_activity WHERE backend_type = 'client backend' AND state <> 'idle' AND pid <> pg_backend_pid()
		GROUP BY 1, 2 ORDER BY 3 DESC`)
	if err != nil {
		return "", err
	}
	b.WriteString("sessions")
	for rows.Next() {
		var wait, state string
		var n int
		var oldest float64
		if err := rows.Scan(&wait, &state, &n, &oldest); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, " [%d %s %s, oldest transaction %.1fs]", n, state, wait, oldest)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	var ssn string
	_ = conn.QueryRow(ctx, `SHOW synchronous_standby_names`).Scan(&ssn)
	fmt.Fprintf(&b, "; synchronous_standby_names %q; standbys", ssn)
	rows, err = conn.Query(ctx, `SELECT application_name, state, sync_state,
		coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn), -1)::bigint
		FROM pg_stat_replication ORDER BY application_name`)
	if err != nil {
		return "", err
	}
	for rows.Next() {
		var name, state, syncState string
		var behind int64
		if err := rows.Scan(&name, &state, &syncState, &behind); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, " [%s %s %s, flush %d bytes behind]", name, state, syncState, behind)
	}
	return b.String(), rows.Err()
}
