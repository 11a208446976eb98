package store

import (
	"cmp"
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/purser-io/purser/internal/hub/audit"
)

// GroupCommit commits audited transactions several at a time. Every
// audited change holds the audit chain's head row from its append to its
// commit, so commits are serial, and each waits for the database's
// synchronous standby: across a link of 5 ms round trip that bounds the
// farm at about 200 changes a second, whatever the number of replicas.
// A group runs the transactions queued meanwhile (each under a savepoint
// of its own, so that one that fails is rolled back alone) in one
// database transaction, appends their audit entries together at its end,
// hashed in order into the chain, and commits once; each caller is
// answered only once the group has committed (or failed). Groups run on
// several connections, so the next group does its work while the one
// before waits for its commit; only the append and the commit are serial.
type GroupCommit struct {
	s     *Store
	queue chan *groupTx
	max   int
	stop  chan struct{}
	wg    sync.WaitGroup
}

type groupTx struct {
	ctx  context.Context
	fn   func(tx *Tx) error
	err  error
	done chan struct{}
}

// Defaults of NewGroupCommit.
const (
	DefaultGroupWorkers = 4
	DefaultGroupSize    = 64
	// groupTimeout bounds one group's transaction.
	groupTimeout = 30 * time.Second
)

// NewGroupCommit starts workers (DefaultGroupWorkers when 0) that commit
// groups of at most size transactions (DefaultGroupSize when 0); Close
// stops them.
func NewGroupCommit(s *Store, workers, size int) *GroupCommit {
	g := &GroupCommit{s: s, queue: make(chan *groupTx), max: cmp.Or(size, DefaultGroupSize), stop: make(chan struct{})}
	for range cmp.Or(workers, DefaultGroupWorkers) {
		g.wg.Go(g.work)
	}
	return g
}

// Tx runs fn in the next group and returns its outcome once the group has
// committed: nil when fn succeeded and the group committed, fn's error
// (its changes rolled back, the others' not), or the group's commit
// error. As with Store.Tx, fn may run more than once and must have no
// effects outside tx. Once fn is queued the call waits for the group even
// if ctx ends, since the change may commit with it; a group leaves out a
// transaction whose ctx has ended before it starts.
func (g *GroupCommit) Tx(ctx context.Context, fn func(tx *Tx) error) error {
	r := &groupTx{ctx: ctx, fn: fn, done: make(chan struct{})}
	select {
	case g.queue <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-g.stop:
		return ErrUnavailable
	}
	<-r.done
	return r.err
}

// Close stops the workers once their groups are done; later calls of Tx
// fail with ErrUnavailable.
func (g *GroupCommit) Close() {
	close(g.stop)
	g.wg.Wait()
}

// work takes a transaction, and whatever else is waiting up to the group
// size, and commits them as one group.
func (g *GroupCommit) work() {
	for {
		var first *groupTx
		select {
		case first = <-g.queue:
		case <-g.stop:
			return
		}
		group := []*groupTx{first}
	collect:
		for len(group) < g.max {
			select {
			case r := <-g.queue:
				group = append(group, r)
			default:
				break collect
			}
		}
		g.commit(group)
	}
}

func (g *GroupCommit) commit(group []*groupTx) {
	var live []*groupTx
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			close(r.done)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	results := make([]error, len(live))
	err := g.s.Tx(ctx, func(tx *Tx) error {
		var entries []*audit.Entry
		tx.auditBuf = &entries
		if len(live) == 1 {
			// Alone: its error rolls the whole transaction back anyway.
			if results[0] = live[0].fn(tx); results[0] != nil {
				return results[0]
			}
		} else {
			for i, r := range live {
				var err error
				if results[i], err = g.run(ctx, tx, i, r, &entries); err != nil {
					return err
				}
			}
		}
		tx.auditBuf = nil
		return tx.Audit().AppendMany(ctx, entries)
	})
	for i, r := range live {
		if results[i] == nil {
			results[i] = err
		}
		r.err = results[i]
		close(r.done)
	}
}

// run runs one transaction of a group under a savepoint, rolling back to
// it (and dropping its audit entries) when fn fails. result is fn's
// error; err is the group's, when a savepoint itself fails.
func (g *GroupCommit) run(ctx context.Context, tx *Tx, i int, r *groupTx, entries *[]*audit.Entry) (result, err error) {
	sp := "purser_group_" + strconv.Itoa(i)
	if _, err = tx.exec(ctx, "SAVEPOINT "+sp); err != nil {
		return nil, classify(err)
	}
	mark := len(*entries)
	if result = r.fn(tx); result == nil {
		_, err = tx.exec(ctx, "RELEASE SAVEPOINT "+sp)
		return nil, classify(err)
	}
	*entries = (*entries)[:mark]
	_, err = tx.exec(ctx, "ROLLBACK TO SAVEPOINT "+sp)
	return result, classify(err)
}
