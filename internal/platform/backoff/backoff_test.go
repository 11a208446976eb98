package backoff

import (
	"context"
	"testing"
	"time"
)

func TestExponential(t *testing.T) {
	base, max := 100*time.Millisecond, 5*time.Second
	for attempt, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		for range 100 {
			if d := Exponential(attempt, base, max); d < want/2 || d > want {
				t.Fatalf("attempt %d: %v, want within [%v, %v]", attempt, d, want/2, want)
			}
		}
	}
	for _, attempt := range []int{10, 62, 1000} {
		if d := Exponential(attempt, base, max); d < max/2 || d > max {
			t.Fatalf("attempt %d: %v, want capped at %v", attempt, d, max)
		}
	}
}

func TestJitterAndSleep(t *testing.T) {
	for range 100 {
		if d := Jitter(time.Second); d < time.Second || d > 1200*time.Millisecond {
			t.Fatalf("Jitter(1s) = %v", d)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep ignored a done context")
	}
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep did not report that the time passed")
	}
}
