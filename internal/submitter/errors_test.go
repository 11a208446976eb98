package submitter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/purser-io/purser/internal/clusters"
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
