package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/api/kubeapi"
	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/hub/store"
)

// The bounds of issue 33 (holes 6, 11, 12, 13 and 14): what one tenant's
// requests may take of the hub, and what the farm's views tell her.
func testBounds(t *testing.T, f *farm) {
	// /k8s serves the kinds the cluster's agent reported: wait for them.
	eventually(t, "the member's kinds served under /k8s", func() error {
		for _, path := range []string{"/k8s/api/v1/configmaps", "/k8s/apis/batch/v1/jobs"} {
			if a := f.do("admin", "GET", path, nil); a.code != http.StatusOK {
				return fmt.Errorf("%s: %d %s", path, a.code, a.raw)
			}
		}
		return nil
	})
	t.Run("AliasBombThroughK8s", func(t *testing.T) { testK8sAliasBomb(t, f) })
	t.Run("K8sWatchesCappedPerUser", func(t *testing.T) { testK8sWatchCap(t, f) })
	t.Run("K8sRequestsCappedPerUser", func(t *testing.T) { testK8sRequestCap(t, f) })
	t.Run("ProxyAnswersOnlyItsOwnHost", func(t *testing.T) { testProxyHost(t, f) })
	t.Run("ClusterDetailHiddenFromTenants", func(t *testing.T) { testClusterDetail(t, f) })
	t.Run("CanIWildcardsTellTheTruth", func(t *testing.T) { testCanIWildcards(t, f) })
}

// k8sAliasBomb is a body of about 50 KB, as the hostile tenant's was,
// whose YAML aliases would expand to about 100 MB: one 40 KiB anchor
// referenced 2,500 times, under a field the review does not know. Few
// aliases of one large scalar pass the YAML library's own guard against
// aliasing (its ratio of aliases to nodes), as hers did.
func k8sAliasBomb(kind, spec string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: authorization.k8s.io/v1\nkind: %s\nspec: %s\nbomb:\n  a: &a %q\n  b: [", kind, spec, strings.Repeat("x", 40<<10))
	for j := range 2500 {
		if j > 0 {
			b.WriteString(",")
		}
		b.WriteString("*a")
	}
	b.WriteString("]\n")
	return b.String()
}

// Hole 6: a 64 KB YAML alias body POSTed to selfsubjectaccessreviews was
// expanded to about 1 GB (201 after 4 s). Every /k8s body now meets the
// REST API's bound (v1alpha1.BoundedJSON) and is refused with 413 before
// an alias expands; so are the REST API's small bodies (a move's).
func testK8sAliasBomb(t *testing.T, f *farm) {
	access := k8sAliasBomb("SelfSubjectAccessReview", "{resourceAttributes: {verb: list, resource: configmaps, namespace: "+f.own+"}}")
	rules := k8sAliasBomb("SelfSubjectRulesReview", "{namespace: "+f.own+"}")
	if len(access) > 64<<10 {
		t.Fatalf("the body is %d bytes; the case is a small body", len(access))
	}
	for _, c := range []struct{ path, body string }{
		{"/k8s/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", access},
		{"/k8s/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", rules},
		{"/k8s/clusters/dc1/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", access},
		{"/k8s/clusters/dc1/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", rules},
	} {
		start := time.Now()
		a := f.refused("an alias bomb to "+c.path, http.StatusRequestEntityTooLarge, func() answer {
			return f.yaml("mallory", "POST", c.path, c.body)
		})
		if a.str("kind") != "Status" || a.str("reason") != "RequestEntityTooLarge" || !strings.Contains(a.str("message"), "aliases") {
			t.Errorf("%s: the 413 is not a Status that says why: %s", c.path, a.raw)
		}
		t.Logf("%s: a %d-byte body of aliases refused in %v", c.path, len(c.body), time.Since(start).Round(time.Millisecond))
	}
	// The same review without the bomb is answered: the bound refuses
	// the expansion, not the review.
	f.yaml("mallory", "POST", "/k8s/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
		"apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec: {resourceAttributes: {verb: list, resource: configmaps, namespace: "+f.own+"}}\n").
		want(t, http.StatusCreated)
	// A REST body read by a small decoder of its own meets the same bound.
	f.refused("an alias bomb as a move's body", http.StatusRequestEntityTooLarge, func() answer {
		return f.yaml("mallory", "POST", "/api/v1/runnables/"+f.own+"/nothing/move", strings.Replace(access, "apiVersion", "to: dc1\napiVersion", 1))
	})
}

// openWatch opens a /k8s watch of user's ConfigMaps in ns; the answer's
// body stays open until cancel.
func (f *farm) openWatch(user, ns string) (*http.Response, context.CancelFunc) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", f.url+"/k8s/api/v1/namespaces/"+ns+"/configmaps?watch=true", http.NoBody)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.tokens[user])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		f.t.Fatal(err)
	}
	return resp, func() { cancel(); resp.Body.Close() }
}

// Hole 14: one tenant held 2,000 open /k8s watches. Each user may hold
// kubeapi.DefaultWatchesPerUser; the next is refused with a 429 Status
// naming the cap, while other users keep theirs, and a watch closed
// frees its place.
func testK8sWatchCap(t *testing.T, f *farm) {
	var open []context.CancelFunc
	defer func() {
		for _, c := range open {
			c()
		}
	}()
	for i := range kubeapi.DefaultWatchesPerUser {
		resp, cancel := f.openWatch("mallory", f.own)
		open = append(open, cancel)
		if resp.StatusCode != http.StatusOK {
			raw, _ := io.ReadAll(resp.Body)
			t.Fatalf("watch %d of %d: %d %s", i+1, kubeapi.DefaultWatchesPerUser, resp.StatusCode, raw)
		}
	}
	// over opens one more watch, and closes it; a refusal is read whole
	// (an open watch's body never ends).
	over := func() (int, string, string) {
		resp, cancel := f.openWatch("mallory", f.own)
		defer cancel()
		if resp.StatusCode == http.StatusOK {
			return resp.StatusCode, "", ""
		}
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(raw)
	}
	code, retry, raw := over()
	var st struct{ Kind, Reason, Message string }
	_ = json.Unmarshal([]byte(raw), &st)
	if code != http.StatusTooManyRequests || retry == "" || st.Kind != "Status" || st.Reason != "TooManyRequests" ||
		!strings.Contains(st.Message, fmt.Sprintf("has %d watches open", kubeapi.DefaultWatchesPerUser)) {
		t.Fatalf("watch %d: %d (Retry-After %q) %s; want 429 with a Status naming the cap", kubeapi.DefaultWatchesPerUser+1, code, retry, raw)
	}
	t.Logf("refused: %s", st.Message)
	// Another user is not held by mallory's watches.
	resp, cancel := f.openWatch("victor", f.victim)
	cancel()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("victor's watch while mallory is at her cap: %d", resp.StatusCode)
	}
	// A watch closed frees its place (once the server sees it go).
	open[0]()
	eventually(t, "a closed watch's place freed", func() error {
		if code, _, raw := over(); code != http.StatusOK {
			return fmt.Errorf("%d %s", code, raw)
		}
		return nil
	})
}

// Hole 14, the other half: one user's requests under way under /k8s are
// capped too. Reviews whose bodies have not arrived are requests under
// way (each holds its place until its body is read, at most the read
// timeout); at kubeapi.DefaultRequestsPerUser of them the next request of
// the same user is refused 429, another user's is answered, and the
// places are freed when the connections close. A refused request holds
// nothing: its connection is closed right after the 429, not kept until
// the read timeout while its body trickles in.
func testK8sRequestCap(t *testing.T, f *farm) {
	u, _ := url.Parse(f.url)
	var conns []net.Conn
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
		conns = nil
	}
	defer closeAll()
	var d net.Dialer
	// hold sends a review whose body never comes.
	hold := func() net.Conn {
		conn, err := d.DialContext(t.Context(), "tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /k8s/apis/authorization.k8s.io/v1/selfsubjectaccessreviews HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", u.Host, f.tokens["mallory"])
		return conn
	}
	for range kubeapi.DefaultRequestsPerUser {
		conns = append(conns, hold())
	}
	list := "/k8s/api/v1/namespaces/" + f.own + "/configmaps"
	eventually(t, "mallory's requests under way at the cap", func() error {
		a := f.do("mallory", "GET", list, nil)
		if a.code == http.StatusTooManyRequests {
			return nil
		}
		// The poll takes a place while it is answered: a held review
		// that arrived meanwhile was refused (and its connection
		// closed), and is sent again.
		for i, c := range conns {
			_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
			if n, err := c.Read(make([]byte, 1)); n > 0 || errors.Is(err, io.EOF) {
				c.Close()
				conns[i] = hold()
			}
		}
		return fmt.Errorf("%d %s", a.code, a.raw)
	})
	a := f.do("mallory", "GET", list, nil)
	if a.str("kind") != "Status" || a.header.Get("Retry-After") == "" ||
		!strings.Contains(a.str("message"), fmt.Sprintf("has %d requests under way", kubeapi.DefaultRequestsPerUser)) {
		t.Errorf("past the cap: %d (Retry-After %q) %s; want a Status naming the cap", a.code, a.header.Get("Retry-After"), a.raw)
	}
	// One more review whose body trickles: refused, and its connection
	// closed at once rather than held until the read timeout.
	extra := hold()
	defer extra.Close()
	_ = extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	answer, err := io.ReadAll(extra)
	if err != nil || !strings.HasPrefix(string(answer), "HTTP/1.1 429") {
		t.Errorf("a request past the cap with a body to come: %q %v; want a 429 and the connection closed within 10s", answer, err)
	}
	f.do("victor", "GET", "/k8s/api/v1/namespaces/"+f.victim+"/configmaps", nil).want(t, http.StatusOK)
	closeAll()
	eventually(t, "the places freed", func() error {
		if a := f.do("mallory", "GET", list, nil); a.code != http.StatusOK {
			return fmt.Errorf("%d %s", a.code, a.raw)
		}
		return nil
	})
}

// Hole 11: `purser kubeconfig --proxy` answered any Host, so a web page
// could reach it by DNS rebinding and read the farm with the user's
// credential. It answers only requests addressed to its own address.
func testProxyHost(t *testing.T, f *farm) {
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- client.KubeProxy(ctx, ln, f.url, func(context.Context) (string, error) { return f.tokens["mallory"], nil })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	get := func(host string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+ln.Addr().String()+"/k8s/api/v1/namespaces/"+f.own+"/configmaps", http.NoBody)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, host := range []string{ln.Addr().String(), "localhost:" + port} {
		if code, raw := get(host); code != http.StatusOK || !strings.Contains(raw, `"kind":"ConfigMapList"`) {
			t.Errorf("Host %s: %d %s", host, code, raw)
		}
	}
	for _, host := range []string{"rebound.attacker.example:" + port, "rebound.attacker.example"} {
		if code, raw := get(host); code != http.StatusForbidden || !strings.Contains(raw, "DNS rebinding") || strings.Contains(raw, "ConfigMap") {
			t.Errorf("Host %s: %d %s, want 403 naming DNS rebinding", host, code, raw)
		}
	}
}

// Hole 12: tenants saw member API addresses and transport errors in
// cluster views and in /k8s Warning headers. They see each condition's
// reason and time; admins keep the detail. What the controller's probes
// and the agent's heartbeat write is stored here directly, as they
// would store it for a cluster whose API does not answer.
func testClusterDetail(t *testing.T, f *farm) {
	const addr = "127.0.0.1:1"
	const leak = "dial tcp " + addr + ": connect: connection refused"
	name := "dead-" + strings.TrimPrefix(f.own, "mal-")
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: %s, cluster: {server: \"https://%s\"}}]\n"+
		"users: [{name: u, user: {token: x}}]\ncontexts: [{name: %s, context: {cluster: %s, user: u}}]\ncurrent-context: %s\n", name, addr, name, name, name)
	body, _ := json.Marshal(map[string]any{"apiVersion": "purser.io/v1alpha1", "kind": "Cluster",
		"metadata": map[string]any{"name": name}, "spec": map[string]any{"kubeconfig": kc}})
	f.do("admin", "POST", "/api/v1/clusters", body).want(t, http.StatusCreated)
	t.Cleanup(func() { f.do("admin", "DELETE", "/api/v1/clusters/"+name, nil) })
	ctx := context.Background()
	since := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	status, _ := json.Marshal(v1alpha1.ClusterStatus{Conditions: []v1alpha1.Condition{{Type: v1alpha1.ConditionReady, Status: "False",
		Reason: "Unreachable", LastTransitionTime: since, Message: "GET https://" + addr + "/readyz: " + leak}}})
	if err := f.store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.Clusters().UpdateStatus(ctx, name, status); err != nil {
			return err
		}
		if err := tx.Clusters().RecordViews(ctx, "dc-bounds", []store.ViewRecord{{Cluster: name, Outcome: "unreachable", Detail: leak,
			Failing: true, FailingFor: time.Minute}}); err != nil {
			return err
		}
		return tx.Agents().RecordHeartbeat(ctx, name, time.Now(), []byte(`{"connected": false, "synced": true, "error": "`+leak+`"}`), false)
	}); err != nil {
		t.Fatal(err)
	}

	for _, path := range []string{"/api/v1/clusters/" + name, "/api/v1/clusters", "/api/v1/inventory?namespace=" + f.own + "&cluster=" + name} {
		a := f.do("mallory", "GET", path, nil).want(t, http.StatusOK)
		if strings.Contains(string(a.raw), addr) || strings.Contains(string(a.raw), "dial tcp") {
			t.Errorf("mallory reads %s with the member's address: %s", path, a.raw)
		}
		if !strings.Contains(string(a.raw), name) {
			t.Errorf("mallory's %s does not show the cluster: %s", path, a.raw)
		}
		if a := f.do("admin", "GET", path, nil).want(t, http.StatusOK); !strings.Contains(string(a.raw), leak) {
			t.Errorf("the admin's %s lost the detail: %s", path, a.raw)
		}
	}
	c := f.do("mallory", "GET", "/api/v1/clusters/"+name, nil)
	var got v1alpha1.Cluster
	if err := json.Unmarshal(c.raw, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Reason != "Unreachable" || !got.Status.Conditions[0].LastTransitionTime.Equal(since) ||
		got.Status.State != v1alpha1.ClusterNotReady || len(got.Status.Views) != 1 || got.Status.Views[0].Outcome != "unreachable" ||
		got.Status.Agent == nil || got.Status.Agent.Freshness.Reason != v1alpha1.FreshKubeAPIUnreachable {
		t.Errorf("mallory does not see the condition, its reason and time, the view's outcome and the freshness: %s", c.raw)
	}

	warning := func(user, path string) string {
		a := f.do(user, "GET", path, nil).want(t, http.StatusOK)
		return strings.Join(a.header.Values("Warning"), "\n")
	}
	if w := warning("mallory", "/k8s/api/v1/namespaces/"+f.own+"/configmaps"); !strings.Contains(w, "cluster "+name) ||
		strings.Contains(w, addr) || strings.Contains(w, "dial tcp") {
		t.Errorf("mallory's /k8s Warning: %q; want the cluster named, without its address", w)
	}
	if w := warning("admin", "/k8s/api/v1/configmaps"); !strings.Contains(w, "dial tcp") {
		t.Errorf("the admin's /k8s Warning lost the detail: %q", w)
	}
}

// Hole 13: `kubectl auth can-i list '*' -n team-a` said yes and the rules
// review listed *.*, though Nodes are refused. '*' is yes only when the
// policy grants every resource it stands for, and the rules name what is
// granted.
func testCanIWildcards(t *testing.T, f *farm) {
	review := func(user, group, resource, ns string) answer {
		body := fmt.Sprintf(`{"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": {"verb": "list", "group": %q, "resource": %q, "namespace": %q}}}`,
			group, resource, ns)
		return f.do(user, "POST", "/k8s/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", []byte(body)).want(t, http.StatusCreated)
	}
	allowed := func(a answer) bool {
		st, _ := a.body["status"].(map[string]any)
		return st["allowed"] == true
	}
	for _, c := range []struct {
		user, group, resource string
		want                  bool
	}{
		{"mallory", "", "*", false},
		{"mallory", "*", "*", false},
		{"mallory", "", "nodes", false},
		{"mallory", "", "configmaps", true},
		{"mallory", "batch", "*", true},
		{"admin", "", "*", true},
		{"admin", "*", "*", true},
	} {
		if a := review(c.user, c.group, c.resource, f.own); allowed(a) != c.want {
			t.Errorf("%s: can-i list %s (group %q) -n %s: %s, want allowed=%v", c.user, c.resource, c.group, f.own, a.raw, c.want)
		}
	}
	a := f.do("mallory", "POST", "/k8s/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
		[]byte(`{"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "`+f.own+`"}}`)).want(t, http.StatusCreated)
	var rr struct {
		Status struct {
			ResourceRules []struct{ Verbs, APIGroups, Resources []string } `json:"resourceRules"`
		} `json:"status"`
	}
	if err := json.Unmarshal(a.raw, &rr); err != nil {
		t.Fatal(err)
	}
	granted := map[string]bool{}
	for _, r := range rr.Status.ResourceRules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				granted[res+"."+g] = true
			}
		}
	}
	if granted["*.*"] || granted["nodes."] || !granted["configmaps."] || !granted["jobs.batch"] {
		t.Errorf("mallory's rules in her namespace: %v; want configmaps and jobs named, neither *.* nor nodes", granted)
	}
}
