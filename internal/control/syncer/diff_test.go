package syncer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/internal/api/auth"
	"github.com/purser-io/purser/internal/api/server"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
	"github.com/purser-io/purser/internal/hub/store/storetest"
)

// TestDiffThroughTheAPI: POST .../diff names, per cluster, the fields an
// apply would change (each cluster's overrides applied) and writes
// nothing: no cluster object's resourceVersion moves, and the store gains
// no row; a Secret's new value is never in the answer.
func TestDiffThroughTheAPI(t *testing.T) {
	f := newFixture(t, storetest.Engines()[0].NewDSN(t))
	s1, s2, s3 := f.clusters[0].Name(), f.clusters[1].Name(), f.clusters[2].Name()
	token := auth.NewToken()
	tokens, err := auth.NewAuthenticator(auth.TokensFile{Tokens: []auth.TokenEntry{{User: "admin", SHA256: auth.HashToken(token)}}})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.NewPolicy(policy.PolicyFile{Admins: []string{"admin"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.New(server.Config{
		Store: f.store, Tokens: tokens, Policy: pol, Sealer: f.sealer,
		Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}))
	t.Cleanup(srv.Close)
	call := func(method, path string, body any) (int, []byte) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(context.Background(), method, srv.URL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, raw
	}
	f.start(syncerOpts{})
	deployable := func(name string, tmpl map[string]any, dc2 string) map[string]any {
		return map[string]any{"apiVersion": "purser.io/v1alpha1", "kind": "Deployable",
			"metadata": map[string]any{"name": name, "namespace": f.ns},
			"spec": map[string]any{"template": tmpl, "overrides": []any{map[string]any{
				"clusterSelector": map[string]any{"matchLabels": map[string]any{"dc": "dc-2"}},
				"patch":           map[string]any{"data": map[string]any{"endpoint": dc2}}}}}}
	}
	path := "/api/v1/deployables/" + f.ns + "/ep"
	if code, raw := call("PUT", path, deployable("ep", configMapTemplate(map[string]any{"endpoint": "a.example"}), "dc2.example")); code != http.StatusCreated {
		t.Fatalf("PUT: %d %s", code, raw)
	}
	f.waitConfigMapData(s2, "ep", "endpoint", "dc2.example")
	f.waitConfigMapData(s1, "ep", "endpoint", "a.example")
	f.waitConfigMapData(s3, "ep", "endpoint", "a.example")
	rec := func() *store.Deployable {
		var r *store.Deployable
		_ = f.store.Read(context.Background(), func(tx *store.Tx) error {
			var err error
			r, err = tx.Deployables().Get(context.Background(), f.ns, "ep")
			return err
		})
		return r
	}()
	f.waitSynced(rec, s1, s2, s3)

	versions := func() string {
		var out []string
		for _, c := range []string{s1, s2, s3} {
			cm, err := f.configMap(context.Background(), c, "ep")
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, c+"="+cm.ResourceVersion)
		}
		return strings.Join(out, " ")
	}
	rows := func() string {
		raw := storetest.RawDB(t, f.dsn)
		var n, a int
		_ = raw.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM audit_log`).Scan(&a)
		_ = raw.QueryRowContext(context.Background(), `SELECT resource_version FROM deployables`).Scan(&n)
		return fmt.Sprintf("audit %d, deployable version %d", a, n)
	}
	beforeKube, beforeRows := versions(), rows()

	// Only dc-2's override changes: only dc-2 would change.
	code, raw := call("POST", path+"/diff", deployable("ep", configMapTemplate(map[string]any{"endpoint": "a.example"}), "dc2-new.example"))
	if code != http.StatusOK {
		t.Fatalf("diff: %d %s", code, raw)
	}
	var res server.DiffResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range res.Clusters {
		got[d.Cluster] = fmt.Sprintf("create=%v changes=%v error=%q", d.Create, d.Changes, d.Error)
	}
	want := map[string]string{s1: `create=false changes=[] error=""`, s2: `create=false changes=[data.endpoint] error=""`, s3: `create=false changes=[] error=""`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("diff per cluster: %v, want %v (%s)", got, want, raw)
	}

	// A Secret that is not there yet would be created; its value is not
	// in the answer.
	value := "pw-" + randomHex(12)
	secret := deployable("pw", map[string]any{"apiVersion": "v1", "kind": "Secret", "stringData": map[string]any{"password": value, "endpoint": "x"}}, "y")
	code, raw = call("POST", "/api/v1/deployables/"+f.ns+"/pw/diff", secret)
	if code != http.StatusOK || !strings.Contains(string(raw), `"create":true`) || strings.Contains(string(raw), value) {
		t.Fatalf("secret diff: %d %s", code, raw)
	}
	if afterKube, afterRows := versions(), rows(); afterKube != beforeKube || afterRows != beforeRows {
		t.Fatalf("diff wrote: clusters %s -> %s, store %s -> %s", beforeKube, afterKube, beforeRows, afterRows)
	}
	if _, err := f.kube[s1].CoreV1().Secrets(f.ns).Get(context.Background(), "pw", metav1.GetOptions{}); err == nil {
		t.Fatal("the diff created the Secret")
	}
}
