package clusters

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
	p, err := NewProber(&rest.Config{Host: srv.URL}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Probe(t.Context()); got.Outcome != ProbeOK {
		t.Fatalf("no /readyz, /healthz 200: %+v", got)
	}
	healthz = http.StatusInternalServerError
	if got := p.Probe(t.Context()); got.Outcome != ProbeNotReady || !strings.HasPrefix(got.Detail, "/healthz answered 500") {
		t.Fatalf("no /readyz, /healthz 500: %+v", got)
	}

	// Accepts, never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
	p, err = NewProber(&rest.Config{Host: "http://" + ln.Addr().String()}, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Probe(t.Context()); got.Outcome != ProbeUnreachable || got.Detail != "no answer to /readyz within 200ms" {
		t.Fatalf("silent server: %+v", got)
	}
}
