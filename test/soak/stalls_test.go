package soak

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purser-io/purser/internal/platform/reconcile"
	"github.com/purser-io/purser/test/soak/farm"
)

// A write stall: the workload kept sending writes and no replica accepted
// any for at least stallAfter. While one lasts, the stall watcher asks
// the database what it waits for (farm.DescribeDatabase) every
// stallProbeEvery, so that the summary can say what held a stall that no
// fault explains.
const (
	stallAfter      = 5 * time.Second
	stallProbeEvery = 2 * time.Second
	// stallReported: shorter stalls stay out of the summary.
	stallReported = 8 * time.Second
)

// stall is one period without an accepted write.
type stall struct {
	From, To time.Time
	// Seen is what the database was doing, at most one line per probe.
	Seen []string
}

// stallWatch watches a writer's accepted writes.
type stallWatch struct {
	t       *testing.T
	f       *farm.DCFarm
	lastAck func() time.Time // when the newest accepted write was answered

	mu     sync.Mutex
	stalls []*stall

	stop func()
	done chan struct{}
}

// watchStalls watches until ctx ends, which should be when the writes do.
func watchStalls(ctx context.Context, t *testing.T, f *farm.DCFarm, lastAck func() time.Time) *stallWatch {
	ctx, cancel := context.WithCancel(ctx)
	s := &stallWatch{t: t, f: f, lastAck: lastAck, stop: cancel, done: make(chan struct{})}
	go s.run(ctx)
	return s
}

// lastAck is when the workload's newest accepted write was answered.
func (w *workload) lastAck() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Time
	// Answers come in about the order they were accepted.
	for i := len(w.acks) - 1; i >= 0 && i >= len(w.acks)-64; i-- {
		if w.acks[i].at.After(last) {
			last = w.acks[i].at
		}
	}
	return last
}

func (s *stallWatch) run(ctx context.Context) {
	defer close(s.done)
	var cur *stall
	defer func() {
		// The load ends with the watch: a stall going on ends there.
		if cur != nil {
			s.mu.Lock()
			cur.To = time.Now()
			s.mu.Unlock()
		}
	}()
	var probed time.Time
	for reconcile.Sleep(ctx, 500*time.Millisecond) {
		last := s.lastAck()
		if last.IsZero() {
			continue
		}
		if time.Since(last) < stallAfter {
			if cur != nil {
				s.mu.Lock()
				cur.To = last
				s.mu.Unlock()
				cur = nil
			}
			continue
		}
		if cur == nil || !cur.From.Equal(last) {
			cur = &stall{From: last}
			s.mu.Lock()
			s.stalls = append(s.stalls, cur)
			s.mu.Unlock()
		}
		if time.Since(probed) < stallProbeEvery {
			continue
		}
		probed = time.Now()
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		seen := s.f.DescribeDatabase(pctx)
		cancel()
		line := fmt.Sprintf("%s (no write accepted for %s): %s", stamp(), time.Since(last).Round(100*time.Millisecond), seen)
		s.t.Logf("write stall %s", line)
		s.mu.Lock()
		cur.Seen = append(cur.Seen, line)
		s.mu.Unlock()
	}
}

// finish stops the watch and returns the stalls long enough to report.
func (s *stallWatch) finish() []*stall {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*stall
	for _, st := range s.stalls {
		if st.To.Sub(st.From) >= stallReported {
			out = append(out, st)
		}
	}
	return out
}

// stallCause is the fault that st began with: the last DC fault to start
// before it (a stall shows a moment after its cause, the time the writes
// in flight take to fail), if that fault was still going or had ended
// within the minute its DC takes to come back. A stall while the primary
// or its synchronous standby is out of reach is Patroni's wait, which the
// RTO already reports.
func stallCause(st *stall, faults []*dcFault) string {
	var cause *dcFault
	for _, fl := range faults {
		if !fl.At.After(st.From.Add(time.Second)) {
			cause = fl
		}
	}
	if cause == nil || (!cause.End.IsZero() && cause.End.Add(time.Minute).Before(st.From)) {
		return "no DC fault"
	}
	return fmt.Sprintf("%s of %s at %s", cause.Kind, cause.DC.Name, cause.At.UTC().Format("15:04:05"))
}

func describeStalls(stalls []*stall, faults []*dcFault) string {
	if len(stalls) == 0 {
		return fmt.Sprintf("  write stalls of %s or more: none\n", stallReported)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  write stalls of %s or more (no write accepted by any replica):\n", stallReported)
	for _, st := range stalls {
		fmt.Fprintf(&b, "    at %s for %.1f s, during %s\n", st.From.UTC().Format("15:04:05"), st.To.Sub(st.From).Seconds(), stallCause(st, faults))
		if len(st.Seen) > 0 {
			// The probe at the stall's longest shows what held it.
			fmt.Fprintf(&b, "      %s\n", st.Seen[len(st.Seen)-1])
		}
	}
	return b.String()
}
