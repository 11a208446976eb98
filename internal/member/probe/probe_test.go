package probe

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestProbeAnswers covers what the sandbox's kube-apiservers never do:
// a server without /readyz (Kubernetes before 1.16 had only /healthz)
// and one that accepts connections but never answers. The server here
// stands for such a kube-apiserver; the answers of a real one are tested
// on the sandbox (TestHealthMonitorOnSandbox).
func TestProbeAnswers(t *testing.T) {
	mux := http.NewServeMux()
	healthz := http.StatusOK
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(healthz) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p, err := New(&rest.Config{Host: srv.URL}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Probe(t.Context()); got.Outcome != OK {
		t.Fatalf("no /readyz, /healthz 200: %+v", got)
	}
	healthz = http.StatusInternalServerError
	if got := p.Probe(t.Context()); got.Outcome != NotReady || !strings.HasPrefix(got.Detail, "/healthz answered 500") {
		t.Fatalf("no /readyz, /healthz 500: %+v", got)
	}

	// Accepts, never answers.
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(conns)
				return
			}
			conns <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for c := range conns {
			c.Close()
		}
	})
	p, err = New(&rest.Config{Host: "http://" + ln.Addr().String()}, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Probe(t.Context()); got.Outcome != Unreachable || got.Detail != "no answer to /readyz within 200ms" {
		t.Fatalf("silent server: %+v", got)
	}
}

func TestAnswerTextKeepsFailedChecks(t *testing.T) {
	body := "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n[+]poststarthook/x ok\n[-]informer-sync failed: reason withheld\nreadyz check failed\n"
	st := metav1.Status{Code: 500, Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
		{Type: metav1.CauseTypeUnexpectedServerResponse, Message: body},
	}}}
	if got := answerText(st, nil); got != "etcd failed: reason withheld; informer-sync failed: reason withheld" {
		t.Fatalf("answerText = %q", got)
	}
	st = metav1.Status{Code: 401, Message: "Unauthorized"}
	if got := answerText(st, []byte(`{"kind":"Status"}`)); got != "Unauthorized" {
		t.Fatalf("answerText of a Status = %q", got)
	}
	if got := clip(strings.Repeat("é", 400)); len(got) > 303 || !strings.HasSuffix(got, "é...") {
		t.Fatalf("clip cut a character: %q", got[len(got)-10:])
	}
}
