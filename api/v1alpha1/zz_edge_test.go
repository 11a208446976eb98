package v1alpha1

import "testing"

func TestZZEdges(t *testing.T) {
	for _, body := range []string{
		`{"apiVersion":"purser.io/v1alpha1","kind":"Runnable","metadata":{"creationTimestamp":"0000-01-01T00:00:00+01:00"},"spec":{"deadline":"9999-12-31T23:59:59.999999999-23:59","template":{"a":[-0.0,1e19,-9223372036854775809,9223372036854775807,1.0e2,0.1,1e-320]}}}`,
		`{"apiVersion":"purser.io/v1alpha1","kind":"Runnable","spec":{"deadline":"2026-01-01T00:00:00+24:00"}}`,
		`{"apiVersion":"purser.io/v1alpha1","kind":"Cluster","spec":{"taints":[{"key":"a","timeAdded":"0001-01-01T00:00:00.5Z"},{"key":"b","timeAdded":"2026-01-01T00:00:00.5+05:00"}]}}`,
		"apiVersion: purser.io/v1alpha1\nkind: Runnable\nspec:\n  template: {a: 0x10, b: 1_000, c: .inf}\n",
		"apiVersion: purser.io/v1alpha1\nkind: Runnable\nspec:\n  template: {a: 0x10, b: 0o17, c: 1e3, d: yes, e: ~, 5: x, f: 2001-12-14}\n",
	} {
		obj, err := Decode([]byte(body), "")
		if err != nil {
			t.Logf("%.60s: %v", body, err)
			continue
		}
		if r, ok := obj.(*Runnable); ok {
			t.Logf("template %#v", r.Spec.Template)
		}
		assertRoundTrip(t, obj)
	}
}
