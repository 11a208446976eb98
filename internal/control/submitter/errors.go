package submitter

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/purser-io/purser/internal/member/clusters"
	"github.com/purser-io/purser/internal/platform/reconcile"
)

// failure is an error from a member cluster, classified once, here, where
// the kind of error is known: the rest of the package acts on the fields
// and never inspects errors again.
type failure struct {
	err error
	// permanent failures end the runnable (Failed); retrying cannot help.
	permanent bool
	// reason is a CamelCase word for the attempt and the metrics.
	reason string
	// unreachable: the cluster did not answer at all, so it should get no
	// new work for a while.
	unreachable bool
	// retryAfter is the server's own request to wait (429, 503), which
	// retry hands to the queue.
	retryAfter time.Duration
	// notSent: the request certainly never reached the server, since no
	// connection to it could be opened.
	notSent bool
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// retry is f as the queue retries it: no sooner than the server asked.
func (f *failure) retry() error {
	if f.retryAfter > 0 {
		return reconcile.RetryAfter(f, f.retryAfter)
	}
	return f
}

// message is what a user reads: the API server's own message when there
// is one, since it says what is wrong with the template.
func (f *failure) message() string {
	var foreign *clusters.ForeignObjectError
	if errors.As(f.err, &foreign) {
		return foreign.Error()
	}
	var status apierrors.APIStatus
	if errors.As(f.err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return f.err.Error()
}

// classify sorts an error met while talking to a member cluster.
func classify(err error) *failure {
	var f *failure
	if errors.As(err, &f) {
		return f
	}
	f = &failure{err: err}
	var foreign *clusters.ForeignObjectError
	var status apierrors.APIStatus
	switch {
	case errors.As(err, &foreign):
		f.permanent, f.reason = true, "ForeignObject"
	case meta.IsNoMatchError(err):
		f.permanent, f.reason = true, "KindNotServed"
	case apierrors.IsInvalid(err):
		f.permanent, f.reason = true, "Invalid"
	case apierrors.IsBadRequest(err):
		f.permanent, f.reason = true, "BadRequest"
	case apierrors.IsForbidden(err):
		f.permanent, f.reason = true, "Forbidden"
	case apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err), apierrors.IsUnsupportedMediaType(err):
		f.permanent, f.reason = true, "NotSupported"
	case apierrors.IsTooManyRequests(err):
		f.reason = "TooManyRequests"
		if s, ok := apierrors.SuggestsClientDelay(err); ok {
			f.retryAfter = time.Duration(s) * time.Second
		}
	case apierrors.IsUnauthorized(err):
		// Credentials the cluster no longer accepts make it as useless as
		// an unreachable one until someone registers new ones; the work is
		// better off elsewhere than failed.
		f.reason, f.unreachable = "Unauthorized", true
	case errors.As(err, &status):
		// Timeouts, 5xx (etcd leader changes and "etcdserver: request
		// timed out" arrive as 500), and anything else the server said:
		// the request may succeed later.
		f.reason = "ServerError"
		if code := status.Status().Code; code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout {
			f.reason = "ServiceUnavailable"
		}
		if s, ok := apierrors.SuggestsClientDelay(err); ok {
			f.retryAfter = time.Duration(s) * time.Second
		}
	case isConnectionError(err):
		f.reason, f.unreachable, f.notSent = "ClusterUnreachable", true, isDialError(err)
	default:
		// Unknown errors are retried: a bug shows up as a retry in the
		// logs and metrics, never as work dropped.
		f.reason = "Unknown"
	}
	return f
}

// isConnectionError reports that the request got no answer from the API
// server: refused, reset, timed out, or the TLS handshake failed.
func isConnectionError(err error) bool {
	var netErr net.Error
	switch {
	case errors.As(err, &netErr),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, context.DeadlineExceeded):
		return true
	}
	// client-go wraps some transport failures in plain strings.
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "http2: client connection lost") ||
		strings.Contains(msg, "TLS handshake")
}

// isDialError reports that the connection the request needed could not be
// opened (refused, no route, the dial timed out), so nothing was written:
// a request on a connection already open fails otherwise.
func isDialError(err error) bool {
	var op *net.OpError
	return (errors.As(err, &op) && op.Op == "dial") || errors.Is(err, syscall.ECONNREFUSED)
}
