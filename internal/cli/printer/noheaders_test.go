package printer

import (
	"bytes"
	"testing"
)

func TestWithoutHeaders(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"one table", "NAME   PHASE\na      Running\nb      Queued\n", "a      Running\nb      Queued\n"},
		{"two kinds", "NAME\na\n\nNAME   KIND\ncfg    ConfigMap\n", "a\n\ncfg    ConfigMap\n"},
		{"header only", "NAME   PHASE\n", ""},
		{"written in pieces", "NA|ME\na|\n|b\n", "a\nb\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := WithoutHeaders(&buf)
			for _, part := range bytes.Split([]byte(c.in), []byte("|")) {
				if _, err := w.Write(part); err != nil {
					t.Fatal(err)
				}
			}
			if buf.String() != c.want {
				t.Fatalf("got %q, want %q", buf.String(), c.want)
			}
		})
	}
}
