package feed_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/purser-io/purser/internal/api/feed"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/hub/stream"
	"github.com/purser-io/purser/internal/hub/stream/streamtest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// TestFeedFloodedWithWords: anyone holding the stream's credentials may
// publish on the word's subject, as fast as the server takes it and with
// any payload and headers. A sustained flood (not a burst, which the
// queue's one key coalesces anyway) costs at most one read of the
// database every MinGap, and nothing of the message is used: a word
// with a payload that names a position far ahead moves no subscriber.
func TestFeedFloodedWithWords(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.Engines()[0].NewDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	srv := streamtest.Start(t, t.TempDir())
	streams := streamtest.Connect(t, srv.URL)
	f := feed.New(feed.Config{Store: st, Changes: streams, Poll: time.Hour})
	s, err := f.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sandboxtest.Eventually(t, 5*time.Second, "the first read", func(context.Context) error {
		if f.Stats().Polls == 0 {
			return context.DeadlineExceeded
		}
		return nil
	})
	// Let the subscription to the subject settle before counting.
	time.Sleep(100 * time.Millisecond)

	const flood = 1500 * time.Millisecond
	before := f.Stats()
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := nats.Connect(srv.URL)
			if err != nil {
				t.Error(err)
				return
			}
			defer nc.Close()
			msg := &nats.Msg{Subject: stream.InventoryChangedSubject, Data: []byte(`{"seq": 9223372036854775807, "head": 1e30}` + strings.Repeat(" ", 1000)),
				Header: nats.Header{"Nats-Msg-Id": {"x"}, "Purser-Seq": {"9223372036854775807"}}}
			for end := time.Now().Add(flood); time.Now().Before(end); {
				_ = nc.PublishMsg(msg)
			}
			_ = nc.Flush()
		}()
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond) // the last words heard
	after := f.Stats()
	wakes, reads := after.Wakes-before.Wakes, after.Polls-before.Polls
	t.Logf("%d words in %v cost %d reads", wakes, flood, reads)
	if wakes < 1000 {
		t.Fatalf("only %d words heard: no flood to measure", wakes)
	}
	// One read per 10 ms at most over the flood and the pause after it,
	// and a few of the scheduler's slack.
	if most := int64((flood+100*time.Millisecond)/(10*time.Millisecond)) + 10; reads > most {
		t.Errorf("a flood of %d words cost %d reads of the database; MinGap allows %d", wakes, reads, most)
	}
	// Nothing ahead was taken from the payload: no batch came, since
	// nothing changed.
	select {
	case b, ok := <-s.Events():
		if ok {
			t.Errorf("a flood with no change delivered a batch at head %d with %d changes", b.Head, len(b.Changes))
		}
	default:
	}
	if err := s.Err(); err != nil {
		t.Errorf("the subscription ended: %v", err)
	}
}
