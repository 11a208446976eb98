package admission

import (
	"fmt"
	"slices"
	"strings"

	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// Level is a Pod Security Standards level: privileged, baseline or
// restricted.
type Level = psapi.Level

// The levels, and the default of a namespace the policy says nothing of.
const (
	LevelPrivileged = psapi.LevelPrivileged
	LevelBaseline   = psapi.LevelBaseline
	LevelRestricted = psapi.LevelRestricted
	DefaultLevel    = psapi.LevelBaseline
)

// ParseLevel checks a level as the policy file writes it.
func ParseLevel(s string) (Level, error) {
	l, err := psapi.ParseLevel(s)
	if err != nil {
		return "", fmt.Errorf("%q is not a Pod Security level (privileged, baseline, restricted)", s)
	}
	return l, nil
}

// Violation is one pod template that may not run, and why.
type Violation struct {
	// Path is where the template is in the object.
	Path string
	// Reason is the Pod Security Standards' own words for a level's
	// checks ("violates PodSecurity \"baseline:latest\": privileged
	// (container \"c\" must not set securityContext.privileged=true)"),
	// or purser's for what it adds.
	Reason string
}

func (v Violation) String() string { return v.Path + ": " + v.Reason }

// ReservedServiceAccounts are the service accounts the manifests of
// deploy/ give purser's components in a member cluster and beside it.
var ReservedServiceAccounts = []string{"purser-agent", "purser-hub", "purser-control-plane"}

// Checker judges pod templates.
type Checker struct {
	eval     policy.Evaluator
	reserved []string
}

// NewChecker returns a Checker that refuses, at every level, pods that
// name one of reserved: the service accounts purser's own components
// run as in member clusters, which a tenant's pod would otherwise borrow.
func NewChecker(reserved ...string) (*Checker, error) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return nil, fmt.Errorf("pod security checks: %w", err)
	}
	return &Checker{eval: eval, reserved: reserved}, nil
}

// DefaultChecker is a Checker reserving ReservedServiceAccounts: what the
// API, the submitter and the syncer judge with.
func DefaultChecker() *Checker {
	c, err := NewChecker(ReservedServiceAccounts...)
	if err != nil {
		panic(err) // the library's own checks, fixed when the binary is built
	}
	return c
}

// Check judges every pod template of obj (PodTemplates) at level, and
// returns what may not run; nil when everything may.
//
// Beyond the standards, at every level below privileged a pod may not
// set nodeName (it would bypass the member cluster's scheduler and land on
// a node of the tenant's choosing) nor carry a patch that no spec shows;
// at every level, no pod may run as a reserved service account.
func (c *Checker) Check(level Level, obj map[string]any) ([]Violation, error) {
	pods, err := PodTemplates(obj)
	if err != nil {
		return nil, err
	}
	lv := psapi.LevelVersion{Level: level, Version: psapi.LatestVersion()}
	var out []Violation
	for _, p := range pods {
		if sa := p.Spec.ServiceAccountName; sa != "" && slices.Contains(c.reserved, sa) {
			out = append(out, Violation{Path: p.Path, Reason: fmt.Sprintf(
				"service account %q is one purser's own components run as; no workload may use it", sa)})
		}
		if level == LevelPrivileged {
			continue
		}
		if p.Unjudgeable != "" {
			out = append(out, Violation{Path: p.Path, Reason: fmt.Sprintf(
				"%s, so the pod cannot be judged at PodSecurity %q; only a namespace at level privileged may use it", p.Unjudgeable, lv.String())})
		}
		if p.Spec.NodeName != "" {
			out = append(out, Violation{Path: p.Path, Reason: fmt.Sprintf(
				"nodeName %q places the pod on a node of its choosing, past the cluster's scheduler; only a namespace at level privileged may set it", p.Spec.NodeName)})
		}
		res := policy.AggregateCheckResults(c.eval.EvaluatePod(lv, &p.Metadata, &p.Spec))
		if !res.Allowed {
			out = append(out, Violation{Path: p.Path, Reason: fmt.Sprintf("violates PodSecurity %q: %s", lv.String(), res.ForbiddenDetail())})
		}
	}
	return out, nil
}

// Summary joins violations into one message.
func Summary(vs []Violation) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, "; ")
}
