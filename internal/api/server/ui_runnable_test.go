package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/purser-io/purser/internal/hub/audit"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/browsertest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// A runnable's page at 1400 x 900, the README's Flink walk-through as it
// ends: three attempts, two failovers a few minutes apart, each carrying a
// Flink job id and a restore path. The failovers' labels in the timeline
// do not cover each other (nor any other text of the chart), each shows
// its full text on hover, and nothing on the page is wider than the window
// (the attempts table wraps what it carries). The attempts and their audit
// entries are written behind the console's back, as the failover
// controller writes them.
func TestConsoleRunnableAt1400(t *testing.T) {
	tab := browsertest.Browser(t)
	h := newHarness(t, storetest.Engines()[0])
	// Made of a native object by a placement policy, as /k8s annotates it.
	h.yaml("alice", "POST", "/api/v1/runnables", strings.Replace(runnableYAML("team-a", "clickstream", "stream"),
		"  namespace: team-a\n", "  namespace: team-a\n  annotations: {purser.io/placement-policy: PlacementPolicy team-a/streaming}\n", 1)).want(t, http.StatusAccepted)

	const (
		job1 = "16a0c4f2b8e94d1a9c3e7f5b2d8a0b063"
		job2 = "7d3e9b1c5a2f48e6b0c4d7a9e1f3c2a51"
	)
	chk := func(job string, n string) string { return "s3://checkpoints/clickstream/" + job + "/chk-" + n }
	carried := func(job, n string) map[string]string {
		return map[string]string{"flink.apache.org/job-id": job, "restorePath": chk(job, n)}
	}
	// What the failover controller's eviction entry says it carried.
	evicted := func(number int, job, n string) string {
		return "; preserved flink.apache.org/job-id=" + job + "; restore point " + chk(job, n) +
			fmt.Sprintf(" (newest completed checkpoint under s3://checkpoints/clickstream, attempt %d); placing it again", number)
	}
	now := time.Now().UTC()
	at := func(minutes float64) time.Time { return now.Add(time.Duration(minutes * float64(time.Minute))) }
	t1, t2, t3 := at(-6), at(-3.6), at(-2.2)
	ctx := context.Background()
	if err := h.store.Tx(ctx, func(tx *store.Tx) error {
		r, err := tx.Runnables().Get(ctx, "team-a", "clickstream")
		if err != nil {
			return err
		}
		r.CreatedAt = at(-10)
		r.Phase, r.Cluster = "Running", "sandbox-1"
		st, err := json.Marshal(map[string]any{"phase": "Running", "cluster": "sandbox-1", "health": "Healthy",
			"preserved":    carried(job2, "3"),
			"restorePoint": map[string]any{"path": chk(job2, "3"), "kind": "Checkpoint", "attempt": 2, "source": "newest completed checkpoint under s3://checkpoints/clickstream"}})
		if err != nil {
			return err
		}
		r.Status = st
		if err := tx.Runnables().Update(ctx, r); err != nil {
			return err
		}
		for _, a := range []*store.Attempt{
			{RunnableUID: r.UID, Number: 1, Cluster: "sandbox-1", StartedAt: at(-9.5), EndedAt: &t1, Result: "Evicted", Reason: "ApplicationUnhealthy",
				Message: "unhealthy on sandbox-1 since " + at(-8).Format(time.RFC3339) + ", longer than tolerationSeconds 120", Reported: carried(job1, "4")},
			{RunnableUID: r.UID, Number: 2, Cluster: "sandbox-2", StartedAt: at(-5.8), EndedAt: &t2, Result: "Evicted", Reason: "ClusterUnreachable",
				Message: "cluster sandbox-2 is tainted purser.io/unreachable:NoExecute", CarriedIn: carried(job1, "4"), Reported: carried(job2, "3")},
			{RunnableUID: r.UID, Number: 3, Cluster: "sandbox-1", StartedAt: t3, CarriedIn: carried(job2, "3")},
		} {
			if err := tx.Attempts().Put(ctx, a); err != nil {
				return err
			}
		}
		for _, e := range []*audit.Entry{
			{Actor: "controller", Action: "evict", Kind: "Runnable", Namespace: "team-a", Name: "clickstream",
				Summary: "attempt 1 evicted from sandbox-1 (ApplicationUnhealthy): unhealthy on sandbox-1, longer than tolerationSeconds 120" + evicted(1, job1, "4")},
			{Actor: "controller", Action: "evict", Kind: "Runnable", Namespace: "team-a", Name: "clickstream",
				Summary: "attempt 2 evicted from sandbox-2 (ClusterUnreachable): cluster sandbox-2 is tainted purser.io/unreachable:NoExecute" + evicted(2, job2, "3")},
		} {
			if err := tx.Audit().Append(ctx, e); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	browsertest.Do(tab, t, "open the runnable", chromedp.EmulateViewport(1400, 900), chromedp.Navigate(h.url+"/#token="+h.tokens["alice"]),
		chromedp.WaitVisible(chromedp.CSS("#user")), browsertest.GoTo("#/runnables/team-a/clickstream"), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	browsertest.WaitText(tab, t, "#attempts", job2)
	browsertest.WaitText(tab, t, "#runnable .placed-by", "a native object written to /k8s, by PlacementPolicy team-a/streaming")
	browsertest.WaitText(tab, t, "#runnable-history", "attempt 2 evicted")
	sandboxtest.Eventually(t, time.Minute, "the timeline's second failover", func(context.Context) error {
		got, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector("#timeline").textContent`))
		if err != nil {
			return err
		}
		if !strings.Contains(got, "ClusterUnreachable") {
			return fmt.Errorf("timeline: %q", got)
		}
		return nil
	})
	browsertest.Screenshot(tab, t, "runnable-1400")

	var page struct {
		Width, ScrollWidth, ClientWidth int
		Labels                          []struct{ Shown, Title string }
		Overlaps                        []string
		Outside                         []string
	}
	if err := chromedp.Do(tab, chromedp.Evaluate[chromedp.Void](`(() => {
		const svg = document.querySelector("#timeline").getBoundingClientRect();
		const box = e => e.getBoundingClientRect();
		const texts = [...document.querySelectorAll("#timeline text")];
		const shown = e => [...e.childNodes].filter(n => n.nodeType === Node.TEXT_NODE).map(n => n.textContent).join("");
		const overlaps = [], outside = [];
		texts.forEach((a, i) => {
			const p = box(a);
			if (p.left < svg.left || p.right > svg.right || p.top < svg.top || p.bottom > svg.bottom) outside.push(shown(a));
			texts.slice(i + 1).forEach(b => {
				const q = box(b);
				if (p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom) overlaps.push(shown(a) + " | " + shown(b));
			});
		});
		window.page = { width: window.innerWidth, scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth,
			labels: [...document.querySelectorAll("#timeline .failover-label")].map(e => ({ shown: shown(e), title: e.querySelector("title")?.textContent || "" })),
			overlaps, outside };
	})()`)); err != nil {
		t.Fatal(err)
	}
	got, err := chromedp.Run(tab, chromedp.Evaluate[string](`JSON.stringify(window.page)`))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(got), &page); err != nil {
		t.Fatal(err)
	}
	if page.Width != 1400 {
		t.Fatalf("the window is %d px wide, want 1400", page.Width)
	}
	if len(page.Overlaps) > 0 {
		t.Errorf("texts of the timeline overlap: %q", page.Overlaps)
	}
	if len(page.Outside) > 0 {
		t.Errorf("texts drawn outside the timeline: %q", page.Outside)
	}
	if page.ScrollWidth > page.ClientWidth {
		t.Errorf("the page scrolls sideways: %d px wide in a %d px window", page.ScrollWidth, page.ClientWidth)
	}
	if len(page.Labels) != 2 {
		t.Fatalf("failover labels: %+v, want one per failover", page.Labels)
	}
	for i, want := range []string{
		"#1 → #2: ApplicationUnhealthy; carried flink.apache.org/job-id=" + job1 + "; restore point " + chk(job1, "4"),
		"#2 → #3: ClusterUnreachable; carried flink.apache.org/job-id=" + job2 + "; restore point " + chk(job2, "3"),
	} {
		l := page.Labels[i]
		if l.Title != want {
			t.Errorf("label %d's full text (on hover): %q, want %q", i+1, l.Title, want)
		}
		if shown := strings.TrimSuffix(l.Shown, "…"); !strings.HasPrefix(want, shown) || shown == "" {
			t.Errorf("label %d shows %q, not a beginning of %q", i+1, l.Shown, want)
		}
	}
}
