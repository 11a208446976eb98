package syncer

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/hub/store/storetest"
	"github.com/purser-io/purser/internal/sandbox/sandboxtest"
)

// A ConfigMap and a Secret reach the matching clusters only, updates reach
// every one of them, a cluster leaving the placement loses its copy, and
// deleting removes them everywhere and purges the rows. The Secret's
// values never appear in the logs or in the database in clear.
func TestDeployablesFollowPlacementUpdatesAndDeletes(t *testing.T) {
	for _, eng := range storetest.Engines() {
		t.Run(eng.Name, func(t *testing.T) {
			f := newFixture(t, eng.NewDSN(t))
			s1, s2, s3 := f.clusters[0].Name(), f.clusters[1].Name(), f.clusters[2].Name()
			f.start(syncerOpts{})

			dc12 := v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "dc", Operator: metav1.LabelSelectorOpIn, Values: []string{"dc-1", "dc-2"}}},
			}}}
			cm := f.put("app-config", configMapTemplate(map[string]any{"color": "blue"}), dc12)
			password1, password2 := "pw-"+randomHex(12), "pw-"+randomHex(12)
			secretTmpl := func(pw string) map[string]any {
				return map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "stringData": map[string]any{"password": pw}}
			}
			on13 := v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{ClusterNames: []string{s1, s3}}}
			sec := f.put("db-credentials", secretTmpl(password1), on13)

			f.waitSynced(cm, s1, s2)
			f.waitSynced(sec, s1, s3)
			f.waitConfigMapData(s1, "app-config", "color", "blue")
			f.waitConfigMapData(s2, "app-config", "color", "blue")
			f.waitSecretValue(s1, "db-credentials", "password", password1)
			f.waitSecretValue(s3, "db-credentials", "password", password1)

			// Both are in place where they match; the others never got them.
			ctx := context.Background()
			if _, err := f.configMap(ctx, s3, "app-config"); !apierrors.IsNotFound(err) {
				t.Errorf("app-config on %s: want NotFound, got %v", s3, err)
			}
			if _, err := f.kube[s2].CoreV1().Secrets(f.ns).Get(ctx, "db-credentials", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("db-credentials on %s: want NotFound, got %v", s2, err)
			}
			sts, err := f.statuses(ctx, cm.UID)
			if err != nil {
				t.Fatal(err)
			}
			if sts[s3] != nil {
				t.Errorf("status of app-config on %s, which it does not match: %+v", s3, sts[s3])
			}
			got, err := f.configMap(ctx, s1, "app-config")
			if err != nil {
				t.Fatal(err)
			}
			if got.Labels[LabelDeployable] != cm.UID || got.Annotations[AnnotationDeployable] != f.ns+"/app-config" ||
				got.Annotations[AnnotationGeneration] != "1" || got.Annotations[AnnotationSpecHash] == "" {
				t.Errorf("purser's label and annotations: %v %v", got.Labels, got.Annotations)
			}

			// Updates reach every matching cluster, with the new generation.
			cm = f.put("app-config", configMapTemplate(map[string]any{"color": "green"}), dc12)
			sec = f.put("db-credentials", secretTmpl(password2), on13)
			f.waitConfigMapData(s1, "app-config", "color", "green")
			f.waitConfigMapData(s2, "app-config", "color", "green")
			f.waitSecretValue(s1, "db-credentials", "password", password2)
			f.waitSecretValue(s3, "db-credentials", "password", password2)
			f.waitSynced(cm, s1, s2)
			f.waitSynced(sec, s1, s3)

			// dc-2 leaves the placement: its copy goes, dc-1's stays.
			dc1 := v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"dc": "dc-1"}}}}
			cm = f.put("app-config", configMapTemplate(map[string]any{"color": "green"}), dc1)
			f.waitConfigMapData(s2, "app-config", "color", "")
			f.waitSynced(cm, s1)
			f.waitConfigMapData(s1, "app-config", "color", "green")

			// Deleting removes them everywhere, then the rows are purged.
			f.del("app-config")
			f.del("db-credentials")
			for _, c := range []string{s1, s2, s3} {
				f.waitConfigMapData(c, "app-config", "color", "")
				f.waitSecretValue(c, "db-credentials", "password", "")
			}
			f.waitPurged(cm)
			f.waitPurged(sec)

			assertNoSecret(t, f, password1, password2)
		})
	}
}

// assertNoSecret searches the syncer's logs and every text column of the
// database for the values, in clear and in base64.
func assertNoSecret(t *testing.T, f *fixture, values ...string) {
	t.Helper()
	logs := f.logs.String()
	if logs == "" {
		t.Fatal("no log captured: the search below would prove nothing")
	}
	raw := storetest.RawDB(t, f.dsn)
	dump := dumpDatabase(t, raw, f.dsn)
	for _, v := range values {
		for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
			if strings.Contains(logs, form) {
				t.Errorf("a Secret value appears in the logs")
			}
			if strings.Contains(dump, form) {
				t.Errorf("a Secret value appears in the database in clear")
			}
		}
	}
}

func dumpDatabase(t *testing.T, db *sql.DB, dsn string) string {
	t.Helper()
	ctx := context.Background()
	q := `SELECT name FROM sqlite_master WHERE type = 'table'`
	if storetest.IsPostgres(dsn) {
		q = `SELECT tablename FROM pg_tables WHERE schemaname = 'public'`
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	var b strings.Builder
	for _, table := range tables {
		rows, err := db.QueryContext(ctx, `SELECT * FROM `+table)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				fmt.Fprintf(&b, "%s\t", v)
			}
			b.WriteByte('\n')
		}
		rows.Close()
	}
	return b.String()
}

// A synced object edited or deleted by someone else is restored within
// seconds, by the informers' events rather than the (here 1 hour) resync.
func TestDriftRepairedByEvents(t *testing.T) {
	f := newFixture(t, storetest.Engines()[0].NewDSN(t))
	f.start(syncerOpts{resync: time.Hour})
	rec := f.put("drifty", configMapTemplate(map[string]any{"k": "v"}), v1alpha1.Placement{})
	all := names(f.clusters...)
	f.waitSynced(rec, all...)
	s1, s2 := all[0], all[1]
	ctx := context.Background()

	cm, err := f.configMap(ctx, s1, "drifty")
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["k"] = "edited by hand"
	start := time.Now()
	if _, err := f.kube[s1].CoreV1().ConfigMaps(f.ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitConfigMapData(s1, "drifty", "k", "v")
	t.Logf("edit repaired in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	if err := f.kube[s2].CoreV1().ConfigMaps(f.ns).Delete(ctx, "drifty", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Eventually(t, wait, "drifty recreated on "+s2, func(ctx context.Context) error {
		_, err := f.configMap(ctx, s2, "drifty")
		return err
	})
	t.Logf("deletion repaired in %s", time.Since(start).Round(time.Millisecond))
	f.waitSynced(rec, all...)
}

// An object of the same name that purser does not manage is reported as a
// conflict on its cluster and left exactly as it was; the other clusters
// get the deployable, and deleting the deployable leaves the foreign
// object alone.
func TestForeignObjectIsAConflictAndUntouched(t *testing.T) {
	f := newFixture(t, storetest.Engines()[0].NewDSN(t))
	all := names(f.clusters...)
	s1 := all[0]
	ctx := context.Background()
	if err := f.clusters[0].EnsureNamespace(ctx, f.ns); err != nil {
		t.Fatal(err)
	}
	foreign, err := f.kube[s1].CoreV1().ConfigMaps(f.ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Labels: map[string]string{"owner": "someone"}},
		Data:       map[string]string{"mine": "yes"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	f.start(syncerOpts{})
	rec := f.put("taken", configMapTemplate(map[string]any{"mine": "no"}), v1alpha1.Placement{})
	f.waitSynced(rec, all[1:]...)
	sandboxtest.Eventually(t, wait, "conflict reported on "+s1, func(ctx context.Context) error {
		sts, err := f.statuses(ctx, rec.UID)
		if err != nil {
			return err
		}
		st := sts[s1]
		if st == nil || st.State != "Error" || !strings.Contains(st.Message, "conflict") {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	assertUntouched := func() {
		t.Helper()
		got, err := f.configMap(ctx, s1, "taken")
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != foreign.ResourceVersion || got.Data["mine"] != "yes" || got.Labels[LabelDeployable] != "" {
			t.Errorf("foreign object changed: rv %s -> %s, data %v, labels %v", foreign.ResourceVersion, got.ResourceVersion, got.Data, got.Labels)
		}
	}
	assertUntouched()

	f.del("taken")
	for _, c := range all[1:] {
		f.waitConfigMapData(c, "taken", "mine", "")
	}
	f.waitPurged(rec)
	assertUntouched()
}
