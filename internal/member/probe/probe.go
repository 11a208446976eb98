// Package probe asks a kube-apiserver whether it is ready, as purser's
// cluster health monitor and each cluster's agent do. It links no
// database code, so that the agent can use it.
package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// Outcome is what one probe of a kube-apiserver found.
type Outcome int

// Probe outcomes.
const (
	OK Outcome = iota
	// NotReady: the kube-apiserver answered, not with 200.
	NotReady
	// Unreachable: no answer at all.
	Unreachable
)

// Result is the outcome of one probe; Detail says what failed, in
// words for an admin (empty when it succeeded).
type Result struct {
	Outcome Outcome
	Detail  string
}

// DefaultTimeout bounds one request of a probe.
const DefaultTimeout = 2 * time.Second

// Prober asks one kube-apiserver whether it is ready.
type Prober struct {
	client  rest.Interface
	timeout time.Duration
}

// New returns a prober for the cluster that cfg reaches, each of
// whose requests gives up after timeout (DefaultTimeout if 0).
func New(cfg *rest.Config, timeout time.Duration) (*Prober, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = timeout
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("probe client: %w", err)
	}
	return &Prober{client: disc.RESTClient(), timeout: timeout}, nil
}

// Probe asks GET /readyz, or /healthz when the server has no /readyz (it
// answers 404): 200 is ready, any other answer is not ready, no answer is
// unreachable.
func (p *Prober) Probe(ctx context.Context) Result {
	code, detail := p.get(ctx, "/readyz")
	if code == http.StatusNotFound {
		code, detail = p.get(ctx, "/healthz")
	}
	switch {
	case code == 0:
		return Result{Outcome: Unreachable, Detail: detail}
	case code != http.StatusOK:
		return Result{Outcome: NotReady, Detail: detail}
	}
	return Result{Outcome: OK}
}

// get returns the HTTP status of GET path, 0 when there was no answer, and
// what went wrong, in words for an admin.
func (p *Prober) get(ctx context.Context, path string) (code int, detail string) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	// No retries: the next probe is the retry, and the hysteresis counts
	// them.
	res := p.client.Get().AbsPath(path).MaxRetries(0).Do(ctx)
	res.StatusCode(&code)
	body, _ := res.Raw()
	// Error, unlike Raw, decodes a Status the server sent.
	err := res.Error()
	if err == nil && code == http.StatusOK {
		return code, ""
	}
	// An answer that is not 200 comes back as a StatusError (and, when
	// its body is plain text, without the status code on the Result).
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code != 0 {
		st := status.Status()
		return int(st.Code), fmt.Sprintf("%s answered %d: %s", path, st.Code, answerText(st, body))
	}
	if err == nil {
		return code, fmt.Sprintf("%s answered %d: %s", path, code, clip(string(body)))
	}
	var ne net.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return 0, fmt.Sprintf("no answer to %s within %s", path, p.timeout)
	}
	return 0, transportError(err)
}

// answerText is the useful part of a not-ready answer: the failed checks
// of /readyz's verbose text, else the server's message.
func answerText(st metav1.Status, body []byte) string {
	text := string(body)
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if c.Type == metav1.CauseTypeUnexpectedServerResponse && c.Message != "" && c.Message != "unknown" {
				text = c.Message
			}
		}
	}
	var failed []string
	for line := range strings.Lines(text) {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "[-]") {
			failed = append(failed, strings.TrimPrefix(line, "[-]"))
		}
	}
	if len(failed) > 0 {
		return clip(strings.Join(failed, "; "))
	}
	if text = strings.TrimSpace(text); text != "" && !strings.HasPrefix(text, "{") {
		return clip(text)
	}
	return clip(st.Message)
}

// transportError drops the method and URL that net/http puts in front of
// the cause ("Get \"https://...\": dial tcp ...: connection refused"): the
// cluster is named elsewhere, and the cause is what an admin needs.
func transportError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return clip(err.Error())
}

// clip keeps messages short enough for a condition.
func clip(s string) string {
	s = strings.TrimSpace(s)
	n := 300
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
