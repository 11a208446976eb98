package submitter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/purser-io/purser/internal/member/clusters"
)

func TestClassify(t *testing.T) {
	job := schema.GroupResource{Group: "batch", Resource: "jobs"}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "x",
		field.ErrorList{field.Required(field.NewPath("spec", "template", "spec", "containers"), "")})
	leader := apierrors.NewInternalError(errors.New("etcdserver: leader changed"))
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		name        string
		err         error
		permanent   bool
		reason      string
		unreachable bool
		retryAfter  time.Duration
	}{
		{"invalid", invalid, true, "Invalid", false, 0},
		{"forbidden", apierrors.NewForbidden(job, "x", errors.New("no")), true, "Forbidden", false, 0},
		{"bad request", apierrors.NewBadRequest("nope"), true, "BadRequest", false, 0},
		{"kind not served", &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "argoproj.io", Kind: "Workflow"}}, true, "KindNotServed", false, 0},
		{"foreign", &clusters.ForeignObjectError{Kind: "Job", Name: "x", Cluster: "c"}, true, "ForeignObject", false, 0},
		{"429", apierrors.NewTooManyRequests("slow down", 7), false, "TooManyRequests", false, 7 * time.Second},
		{"503", apierrors.NewServiceUnavailable("later"), false, "ServiceUnavailable", false, 0},
		{"server timeout", apierrors.NewServerTimeout(job, "create", 3), false, "ServerError", false, 3 * time.Second},
		{"etcd leader change", leader, false, "ServerError", false, 0},
		{"unauthorized", apierrors.NewUnauthorized("who"), false, "Unauthorized", true, 0},
		{"refused", fmt.Errorf("create: %w", refused), false, "ClusterUnreachable", true, 0},
		{"deadline", fmt.Errorf("create: %w", context.DeadlineExceeded), false, "ClusterUnreachable", true, 0},
		{"unknown", errors.New("something odd"), false, "Unknown", false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := classify(fmt.Errorf("create Job a/b on c: %w", c.err))
			if f.permanent != c.permanent || f.reason != c.reason || f.unreachable != c.unreachable || f.retryAfter != c.retryAfter {
				t.Errorf("classify = {permanent %v reason %s unreachable %v retryAfter %v}, want {%v %s %v %v}",
					f.permanent, f.reason, f.unreachable, f.retryAfter, c.permanent, c.reason, c.unreachable, c.retryAfter)
			}
			if again := classify(f); again != f {
				t.Errorf("a classified error is classified again")
			}
		})
	}
	// Users read the API server's message, not Go's wrapping.
	if got := classify(fmt.Errorf("wrapped: %w", invalid)).message(); got != invalid.ErrStatus.Message {
		t.Errorf("message = %q, want the server's %q", got, invalid.ErrStatus.Message)
	}
}

// A create that could not open a connection certainly never reached the
// server; one that went out on a connection and got no answer may have.
// Both errors come from client-go itself, against a closed port and a
// server that reads requests and never answers.
func TestNotSent(t *testing.T) {
	closed, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusing := closed.Addr().String()
	closed.Close()

	silent, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, conn) }() // reads the request, answers nothing
		}
	}()

	create := func(addr string) error {
		dyn, err := dynamic.NewForConfig(&rest.Config{Host: "http://" + addr, Timeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		job := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "x"}}}
		_, err = dyn.Resource(schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}).Namespace("a").
			Create(t.Context(), job, metav1.CreateOptions{})
		if err == nil {
			t.Fatalf("create on %s succeeded", addr)
		}
		return err
	}
	if f := classify(create(refusing)); !f.unreachable || !f.notSent {
		t.Errorf("refused: %v classified unreachable %v, not sent %v; want both", f, f.unreachable, f.notSent)
	}
	if f := classify(create(silent.Addr().String())); !f.unreachable || f.notSent {
		t.Errorf("no answer: %v classified unreachable %v, not sent %v; want unreachable, maybe sent", f, f.unreachable, f.notSent)
	}
}
