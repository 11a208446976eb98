package resourceversion

import "testing"

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b   string
		cmp    int
		wantOK bool
	}{
		{"1", "2", -1, true},
		{"10", "9", 1, true},
		{"42", "42", 0, true},
		// Longer than a uint64: still decimal integers, still ordered.
		{"184467440737095516160", "18446744073709551615", 1, true},
		{"abc", "abc", 0, true},
		{"abc", "abd", 0, false},
		{"abc", "5", 0, false},
		{"", "5", 0, false},
		{"", "", 0, true},
	} {
		cmp, ok := Compare(tc.a, tc.b)
		if cmp != tc.cmp || ok != tc.wantOK {
			t.Errorf("Compare(%q, %q) = %d, %v; want %d, %v", tc.a, tc.b, cmp, ok, tc.cmp, tc.wantOK)
		}
	}
}
