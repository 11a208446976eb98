package scheduler

import (
	"context"
	"time"
)

// PrepareAhead prepares the firings of the schedules due at tick, as the
// loop does Early before it.
func (s *Scheduler) PrepareAhead(ctx context.Context, tick time.Time) { s.prepareAhead(ctx, tick) }

// ReviewedAhead is how many firings were used as prepared ahead.
func (s *Scheduler) ReviewedAhead() int64 { return s.reviewedAhead.Load() }
