package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The control socket: how a person takes a sandbox cluster down and
// brings it back, or makes a simulated Flink job fail, while the process
// that runs the fleet (purser up) keeps running. It is HTTP over a Unix
// socket in the fleet's folder, DIR/control.sock: only the folder's owner
// can reach it (purser up's data folder is 0700, the socket 0600), no
// port is opened, and the caller gets the answer, or the reason for a
// refusal, when the change is done.

// ControlSocket is the socket's file name in a fleet's folder.
const ControlSocket = "control.sock"

// maxSocketPath is the longest path a Unix socket can be bound at on
// Linux: sun_path holds 108 bytes with the terminating NUL (unix(7)).
const maxSocketPath = 107

// Errors a Control returns, which the socket answers with 404, 400 and
// 409.
var (
	ErrNoCluster   = errors.New("no such sandbox cluster")
	ErrInvalid     = errors.New("invalid request")
	ErrWrongState  = errors.New("not in a state for this")
	errUnreachable = errors.New("nothing answers on the sandbox control socket")
)

// ClusterStatus is one cluster as the control socket lists it.
type ClusterStatus struct {
	Name    string
	Running bool // false: stopped on purpose, until started again
}

// Control is what the control socket asks of the process running the
// fleet. Each method returns once the change is done, with a sentence
// saying what is true now.
type Control interface {
	StopCluster(ctx context.Context, name string) (string, error)
	StartCluster(ctx context.Context, name string) (string, error)
	Clusters() []ClusterStatus
	// FlinkFault sets fault (a flinksim fault's name; "" removes the
	// fault) on the FlinkDeployment namespace/name on cluster, or on every
	// cluster holding it when cluster is "".
	FlinkFault(ctx context.Context, namespace, name, fault, cluster string) (string, error)
}

// ServeControl serves c on DIR/control.sock until ctx is done or stop is
// called.
func ServeControl(ctx context.Context, dir string, c Control) (stop func(), err error) {
	path := filepath.Join(dir, ControlSocket)
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("sandbox control: %s is longer than the %d bytes a Unix socket path may have; use a shorter data folder", path, maxSocketPath)
	}
	// A socket left by a process that died; the fleet's lock says no
	// other process serves this folder.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("sandbox control: %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("sandbox control: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("sandbox control: %w", err)
	}
	srv := &http.Server{Handler: controlHandler(c), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		<-ctx.Done()
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
	}()
	return func() {
		cancel()
		<-done
		_ = os.Remove(path)
	}, nil
}

func controlHandler(c Control) http.Handler {
	mux := http.NewServeMux()
	answer := func(w http.ResponseWriter, msg string, err error) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		switch {
		case err == nil:
			fmt.Fprintln(w, msg)
			return
		case errors.Is(err, ErrNoCluster):
			w.WriteHeader(http.StatusNotFound)
		case errors.Is(err, ErrInvalid):
			w.WriteHeader(http.StatusBadRequest)
		case errors.Is(err, ErrWrongState):
			w.WriteHeader(http.StatusConflict)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
		fmt.Fprintln(w, err)
	}
	mux.HandleFunc("GET /clusters", func(w http.ResponseWriter, _ *http.Request) {
		var b strings.Builder
		for _, s := range c.Clusters() {
			state := "running"
			if !s.Running {
				state = "stopped"
			}
			fmt.Fprintf(&b, "%s\t%s\n", s.Name, state)
		}
		answer(w, strings.TrimSuffix(b.String(), "\n"), nil)
	})
	mux.HandleFunc("POST /clusters/{name}/stop", func(w http.ResponseWriter, r *http.Request) {
		msg, err := c.StopCluster(r.Context(), r.PathValue("name"))
		answer(w, msg, err)
	})
	mux.HandleFunc("POST /clusters/{name}/start", func(w http.ResponseWriter, r *http.Request) {
		msg, err := c.StartCluster(r.Context(), r.PathValue("name"))
		answer(w, msg, err)
	})
	fault := func(w http.ResponseWriter, r *http.Request, fault string) {
		msg, err := c.FlinkFault(r.Context(), r.PathValue("namespace"), r.PathValue("name"), fault, r.URL.Query().Get("cluster"))
		answer(w, msg, err)
	}
	mux.HandleFunc("PUT /flink/{namespace}/{name}/fault", func(w http.ResponseWriter, r *http.Request) {
		f := r.URL.Query().Get("fault")
		if f == "" {
			answer(w, "", fmt.Errorf("%w: no fault named (?fault=)", ErrInvalid))
			return
		}
		fault(w, r, f)
	})
	mux.HandleFunc("DELETE /flink/{namespace}/{name}/fault", func(w http.ResponseWriter, r *http.Request) { fault(w, r, "") })
	return mux
}

// CallControl sends one request to the control socket of the fleet in
// dir and returns its answer; a refusal is an error carrying its reason.
func CallControl(ctx context.Context, dir, method, path string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	sock := filepath.Join(dir, ControlSocket)
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	req, err := http.NewRequestWithContext(ctx, method, "http://sandbox"+path, http.NoBody)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return "", fmt.Errorf("%w (%s): is `purser up --sandbox N` running with this data folder?", errUnreachable, sock)
		}
		return "", fmt.Errorf("sandbox control %s: %w", sock, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	msg := strings.TrimSpace(string(body))
	if resp.StatusCode >= 300 {
		return "", errors.New(msg)
	}
	return msg, nil
}

// FlinkFaultPath is the request path of a FlinkDeployment's fault, with its
// query: fault "" names none (a DELETE), cluster "" every cluster.
func FlinkFaultPath(namespace, name, fault, cluster string) string {
	p := "/flink/" + url.PathEscape(namespace) + "/" + url.PathEscape(name) + "/fault"
	q := url.Values{}
	if fault != "" {
		q.Set("fault", fault)
	}
	if cluster != "" {
		q.Set("cluster", cluster)
	}
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	return p
}
