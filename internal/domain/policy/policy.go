// Package policy is what the policy file says a user may do: roles per
// namespace, approvals, retention, the kinds a namespace may put on member
// clusters and in which scope, the Pod Security level and ClusterRoles of
// its objects, its priority classes and fair share. The API asks it before
// it accepts a change; the submitter and the syncer ask it again, with the
// policy as it is then, right before they act on a member cluster. It
// decides only: reading the file as it changes, and knowing who a request
// comes from, is internal/api/auth's.
package policy

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/internal/domain/admission"
)

// User is an authenticated caller.
type User struct {
	Name   string
	Groups []string
	// Expiry is when the credential stops being valid (an ID token's
	// exp); zero for a token of the tokens file, valid while it is there.
	Expiry time.Time
}

// Role is what a user may do in a namespace. Roles are cumulative in the
// order viewer < editor < admin; approver adds approving to viewer.
type Role string

// The roles a policy grants, weakest first.
const (
	RoleViewer   Role = "viewer"
	RoleEditor   Role = "editor"
	RoleApprover Role = "approver"
	RoleAdmin    Role = "admin"
)

// Verb is an action checked against the policy.
type Verb string

// The verbs the API checks; each comment lists the calls that need it.
const (
	VerbRead    Verb = "read"    // get, list, history
	VerbWrite   Verb = "write"   // create, update, delete, cancel
	VerbApprove Verb = "approve" // approve or reject someone else's change
)

// PolicyFile is the format of the policy file:
//
//	admins: [admin, "group:platform"]   # everything, everywhere, clusters included
//	namespaces:
//	  team-a:
//	    roles:
//	      viewer: ["group:team-a"]
//	      editor: [alice]
//	      approver: [carol]
//	    approval: {runnables: true, deployables: true}
//	    kinds: {deny: ["RoleBinding.rbac.authorization.k8s.io"]}   # see KindRules
//	    retention: {ttlSecondsAfterFinished: 86400}   # ended runnables removed a day later
//	    defaultPriorityClass: batch     # spec.priority of its runnables when unset
//	  "*":                              # applies to every namespace, in addition
//	    roles: {viewer: ["group:auditors"]}
//	priorityClasses:                    # what spec.priority may name; integers are for admins
//	  batch: 0                          # every namespace may use it
//	  urgent: {value: 1000, namespaces: [team-a]}
//	defaultPriorityClass: batch
//
// A subject is a user name or "group:<name>".
type PolicyFile struct {
	Admins     []string                   `json:"admins,omitempty"`
	Namespaces map[string]NamespacePolicy `json:"namespaces,omitempty"`
	// Embedded says where kinds beyond the built-in ones (Lists, Argo
	// workflows' resource templates) keep objects they make their cluster
	// create: those are checked as top-level objects are.
	Embedded []admission.EmbeddedRule `json:"embedded,omitempty"`
	// PriorityClasses name the priorities a runnable's spec.priority may
	// give by name (higher goes first), each with the namespaces whose
	// editors may choose it (sharing.go). A raw integer is for admins.
	PriorityClasses map[string]PriorityClass `json:"priorityClasses,omitempty"`
	// DefaultPriorityClass is the class a runnable submitted without
	// spec.priority gets, unless its namespace names its own; it must be
	// a class every namespace may use.
	DefaultPriorityClass string `json:"defaultPriorityClass,omitempty"`
}

// NamespacePolicy is the roles and approval rules of one namespace.
type NamespacePolicy struct {
	Roles     map[Role][]string `json:"roles,omitempty"`
	Approval  Approval          `json:"approval,omitempty"`
	Kinds     KindRules         `json:"kinds,omitempty"`
	Retention *Retention        `json:"retention,omitempty"`
	// PodSecurity is the Pod Security Standards level the pods of the
	// namespace's objects are held to: privileged, baseline (the default)
	// or restricted. Namespaces purser creates on member clusters are
	// labelled to enforce it there too.
	PodSecurity string `json:"podSecurity,omitempty"`
	// RBAC says what the namespace's RoleBindings may bind beyond its
	// own Roles.
	RBAC RBACRules `json:"rbac,omitempty"`
	// FairShareWeight is the namespace's weight in the fair share of the
	// farm among namespaces of equal priority (1 when unset): a namespace
	// of weight 2 is entitled to twice the share of one of weight 1.
	FairShareWeight float64 `json:"fairShareWeight,omitempty"`
	// DefaultPriorityClass is the class the namespace's runnables get
	// without spec.priority; one the namespace may use.
	DefaultPriorityClass string `json:"defaultPriorityClass,omitempty"`
}

// RBACRules widen what a namespace's RoleBindings may grant.
type RBACRules struct {
	// ClusterRoles are the ClusterRoles (view, edit, ...) a RoleBinding
	// of the namespace may grant, within the namespace.
	ClusterRoles []string `json:"clusterRoles,omitempty"`
}

// Retention says how long ended runnables of a namespace are kept.
type Retention struct {
	// TTLSecondsAfterFinished is given to runnables submitted without
	// spec.ttlSecondsAfterFinished.
	TTLSecondsAfterFinished *int64 `json:"ttlSecondsAfterFinished,omitempty"`
}

// Approval says which changes in a namespace need a second person.
type Approval struct {
	Runnables   bool `json:"runnables,omitempty"`
	Deployables bool `json:"deployables,omitempty"`
}

// Policy answers authorization questions.
type Policy struct {
	f PolicyFile
}

// AnyNamespace is the policy key that applies to every namespace.
const AnyNamespace = "*"

// LoadPolicy reads a policy file.
func LoadPolicy(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	return ParsePolicy(path, data)
}

// ParsePolicy reads the content of the policy file at path.
func ParsePolicy(path string, data []byte) (*Policy, error) {
	var f PolicyFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	p, err := NewPolicy(f)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	return p, nil
}

// NewPolicy checks a policy's content.
func NewPolicy(f PolicyFile) (*Policy, error) {
	for ns, np := range f.Namespaces {
		if r := np.Retention; r != nil && r.TTLSecondsAfterFinished != nil && *r.TTLSecondsAfterFinished < 0 {
			return nil, fmt.Errorf("policy: namespace %s: retention.ttlSecondsAfterFinished must be 0 or more", ns)
		}
		for role := range np.Roles {
			switch role {
			case RoleViewer, RoleEditor, RoleApprover, RoleAdmin:
			default:
				return nil, fmt.Errorf("policy: namespace %s: unknown role %q (viewer, editor, approver, admin)", ns, role)
			}
		}
		if err := checkKindRules(ns, np.Kinds); err != nil {
			return nil, err
		}
		if np.FairShareWeight < 0 {
			return nil, fmt.Errorf("policy: namespace %s: fairShareWeight must be more than 0", ns)
		}
		if np.PodSecurity != "" {
			if _, err := admission.ParseLevel(np.PodSecurity); err != nil {
				return nil, fmt.Errorf("policy: namespace %s: podSecurity: %w", ns, err)
			}
		}
	}
	if err := checkPriorityClasses(f); err != nil {
		return nil, err
	}
	for i, r := range f.Embedded {
		if r.Kind == "" || len(r.Paths) == 0 {
			return nil, fmt.Errorf("policy: embedded[%d]: a rule names a kind (Kind.group) and at least one path", i)
		}
	}
	return &Policy{f: f}, nil
}

func matches(u User, subjects []string) bool {
	for _, s := range subjects {
		if g, ok := strings.CutPrefix(s, "group:"); ok {
			if slices.Contains(u.Groups, g) {
				return true
			}
		} else if s == u.Name {
			return true
		}
	}
	return false
}

// IsAdmin reports whether u administers everything, clusters included.
func (p *Policy) IsAdmin(u User) bool { return matches(u, p.f.Admins) }

// roles returns the roles u holds in namespace ns.
func (p *Policy) roles(u User, ns string) map[Role]bool {
	held := map[Role]bool{}
	for _, key := range []string{ns, AnyNamespace} {
		np, ok := p.f.Namespaces[key]
		if !ok {
			continue
		}
		for role, subjects := range np.Roles {
			if matches(u, subjects) {
				held[role] = true
			}
		}
	}
	return held
}

// Allowed reports whether u may do verb in namespace ns.
func (p *Policy) Allowed(u User, ns string, verb Verb) bool {
	if p.IsAdmin(u) {
		return true
	}
	r := p.roles(u, ns)
	switch verb {
	case VerbRead:
		return r[RoleViewer] || r[RoleEditor] || r[RoleApprover] || r[RoleAdmin]
	case VerbWrite:
		return r[RoleEditor] || r[RoleAdmin]
	case VerbApprove:
		return r[RoleApprover] || r[RoleAdmin]
	}
	return false
}

// ReadsEverywhere reports whether u may read every namespace, and so list
// across namespaces.
func (p *Policy) ReadsEverywhere(u User) bool {
	if p.IsAdmin(u) {
		return true
	}
	np := p.f.Namespaces[AnyNamespace]
	for _, subjects := range np.Roles {
		if matches(u, subjects) {
			return true
		}
	}
	return false
}

// ApprovalRequired reports whether changes of a kind ("Runnable" or
// "Deployable") in namespace ns wait for a second person.
func (p *Policy) ApprovalRequired(ns, kind string) bool {
	for _, key := range []string{ns, AnyNamespace} {
		a := p.f.Namespaces[key].Approval
		if (kind == "Runnable" && a.Runnables) || (kind == "Deployable" && a.Deployables) {
			return true
		}
	}
	return false
}

// RetentionTTL is the ttlSecondsAfterFinished a runnable submitted to ns
// without one gets: the namespace's, else that of every namespace ("*"),
// else nil (kept for good).
func (p *Policy) RetentionTTL(ns string) *int64 {
	for _, key := range []string{ns, AnyNamespace} {
		if r := p.f.Namespaces[key].Retention; r != nil && r.TTLSecondsAfterFinished != nil {
			ttl := *r.TTLSecondsAfterFinished
			return &ttl
		}
	}
	return nil
}

// Access is what a user may do, for a UI to offer only that.
type Access struct {
	User   string   `json:"user"`
	Groups []string `json:"groups,omitempty"`
	// Admin may do everything, clusters included.
	Admin bool `json:"admin"`
	// ReadsEverywhere may list across namespaces and read all history.
	ReadsEverywhere bool `json:"readsEverywhere"`
	// Namespaces lists, per namespace named in the policy, the verbs the
	// user has there ("*" stands for every namespace).
	Namespaces map[string][]Verb `json:"namespaces"`
}

// AccessOf summarizes what u may do.
func (p *Policy) AccessOf(u User) Access {
	a := Access{User: u.Name, Groups: u.Groups, Admin: p.IsAdmin(u), ReadsEverywhere: p.ReadsEverywhere(u), Namespaces: map[string][]Verb{}}
	for ns := range p.f.Namespaces {
		var verbs []Verb
		for _, v := range []Verb{VerbRead, VerbWrite, VerbApprove} {
			if p.Allowed(u, ns, v) {
				verbs = append(verbs, v)
			}
		}
		if len(verbs) > 0 {
			a.Namespaces[ns] = verbs
		}
	}
	return a
}
