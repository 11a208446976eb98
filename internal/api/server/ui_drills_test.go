package server_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/browsertest"
)

// The farm view's what-if of losing a DC (drillFarm: dc1 runs two jobs
// of 2 CPUs, dc2 has room for one): each DC carries its headroom badge,
// an admin sees the shortage named and runs the what-if of dc1 (the job
// of class high moves to dc2-a, the other is left, the verdict Partial);
// a tenant sees the badges but not the action.
func TestConsoleWhatIf(t *testing.T) {
	tab := browsertest.Browser(t)
	h := newHarness(t, storetest.Engines()[0])
	drillFarm(t, h)

	admin := tab
	browsertest.Do(admin, t, "open the console as admin", chromedp.Navigate(h.url+"/#token="+h.tokens["admin"]), chromedp.WaitVisible(chromedp.CSS("#user")),
		browsertest.GoTo("#/farm"), chromedp.WaitVisible(chromedp.CSS(`.headroom[data-dc="dc1"]`)))
	browsertest.WaitText(admin, t, `.headroom[data-dc="dc1"]`, "short: 1 runnable, cpu 2")
	browsertest.WaitText(admin, t, `.headroom[data-dc="dc1"] .message`, "team-a/j0: asks for cpu 2")
	browsertest.WaitText(admin, t, `.headroom[data-dc="dc2"]`, "absorbable")
	browsertest.Screenshot(admin, t, "farm-headroom")
	browsertest.Do(admin, t, "run the what-if of dc1", chromedp.Click(chromedp.CSS(`a.whatif[data-dc="dc1"]`)), chromedp.WaitVisible(chromedp.CSS("#whatif-verdict")))
	browsertest.WaitText(admin, t, "#whatif-verdict", "Partial")
	browsertest.WaitText(admin, t, `#whatif-moves tr[data-runnable="team-a/j1"] td.from`, "dc1-a")
	browsertest.WaitText(admin, t, `#whatif-moves tr[data-runnable="team-a/j1"] td.to`, "dc2-a")
	browsertest.WaitText(admin, t, `#whatif-moves tr[data-runnable="team-a/j1"] td.downtime`, "0.5 s")
	browsertest.WaitText(admin, t, `#whatif-unplaceable tr[data-runnable="team-a/j0"]`, "asks for cpu 2")
	browsertest.WaitText(admin, t, `#whatif-clusters tr[data-cluster="dc1-a"]`, "taken away")
	browsertest.WaitText(admin, t, `#whatif-clusters tr[data-cluster="dc2-a"]`, "1 active runnable")
	browsertest.WaitText(admin, t, "#whatif-summary", "0.5 s")
	browsertest.Screenshot(admin, t, "whatif-dc1")

	// A tenant: the badges, without the message or the action; the
	// badge's showing is the signal the page was drawn.
	alice := tab // one tab: log out, and log in again as alice
	browsertest.Do(alice, t, "log in as a tenant", chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), h.tokens["alice"]), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#user")), browsertest.GoTo("#/farm"), chromedp.WaitVisible(chromedp.CSS(`.headroom[data-dc="dc1"]`)))
	browsertest.WaitText(alice, t, `.headroom[data-dc="dc1"]`, "short: 1 runnable, cpu 2")
	n, err := chromedp.Run(alice, chromedp.Evaluate[int](`document.querySelectorAll("a.whatif, .headroom .message").length`))
	if err != nil || n != 0 {
		t.Fatalf("a tenant is offered %d what-if actions or shortage messages (%v)", n, err)
	}
	browsertest.Screenshot(alice, t, "farm-headroom-tenant")
}
