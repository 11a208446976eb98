package auth

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/internal/domain/policy"
)

// PolicyReport is what CheckPolicy found in a policy file that loads: a
// summary, and warnings about rules that load but will not do what their
// author likely meant.
type PolicyReport struct {
	Admins     int
	Namespaces []string
	Warnings   []string
}

// CheckPolicy reads a policy file as the server does and reports every
// problem: YAML that does not parse (with its line), each unknown field by
// its path (namespaces.team-a.rols), and what NewPolicy refuses. tokens,
// when not nil, is the tokens file the policy goes with: users the policy
// names that have no token there are warned about (they may still sign in
// another way).
func CheckPolicy(data []byte, tokens *TokensFile) (PolicyReport, error) {
	var rep PolicyReport
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return rep, err
	}
	var f policy.PolicyFile
	strict, err := sigsjson.UnmarshalStrict(js, &f)
	if err != nil {
		return rep, fmt.Errorf("not a policy: %w", err)
	}
	var errs []error
	for _, e := range strict {
		var fe sigsjson.FieldError
		if errors.As(e, &fe) {
			errs = append(errs, fmt.Errorf("%s: unknown field", fe.FieldPath()))
		} else {
			errs = append(errs, e)
		}
	}
	if _, err := policy.NewPolicy(f); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return rep, errors.Join(errs...)
	}

	rep.Admins = len(f.Admins)
	warn := func(format string, args ...any) { rep.Warnings = append(rep.Warnings, fmt.Sprintf(format, args...)) }
	subjects := map[string]bool{}
	checkSubjects := func(where string, list []string) {
		for _, s := range list {
			switch g, isGroup := strings.CutPrefix(s, "group:"); {
			case strings.TrimSpace(s) == "":
				warn("%s: an empty subject matches nobody", where)
			case isGroup && g == "":
				warn("%s: %q names no group", where, s)
			case !isGroup:
				subjects[s] = true
			}
		}
	}
	checkSubjects("admins", f.Admins)
	for ns, np := range f.Namespaces {
		rep.Namespaces = append(rep.Namespaces, ns)
		if ns != policy.AnyNamespace && len(validation.IsDNS1123Label(ns)) > 0 {
			warn("namespaces.%s: not a namespace name (lower-case letters, digits and -), so it matches no namespace", ns)
		}
		for role, list := range np.Roles {
			checkSubjects(fmt.Sprintf("namespaces.%s.roles.%s", ns, role), list)
		}
		if (np.Approval.Runnables || np.Approval.Deployables) && !canApprove(f, ns) {
			warn("namespaces.%s: changes wait for approval, but nobody may approve them there (no approver or admin role in %s or \"*\", no admins)", ns, ns)
		}
	}
	for name, c := range f.PriorityClasses {
		for _, ns := range c.Namespaces {
			if _, named := f.Namespaces[ns]; ns != policy.AnyNamespace && !named && len(f.Namespaces[policy.AnyNamespace].Roles) == 0 {
				warn("priorityClasses.%s.namespaces: %s is no namespace of the policy, so no tenant there may choose the class", name, ns)
			}
		}
	}
	sort.Strings(rep.Namespaces)
	if tokens != nil {
		known := map[string]bool{}
		for _, t := range tokens.Tokens {
			known[t.User] = true
		}
		var missing []string
		for s := range subjects {
			if !known[s] {
				missing = append(missing, s)
			}
		}
		sort.Strings(missing)
		for _, s := range missing {
			warn("user %s has no token in the tokens file (purser token create %s makes one; a user who signs in otherwise needs none)", s, s)
		}
	}
	sort.Strings(rep.Warnings)
	return rep, nil
}

// canApprove reports whether someone may approve in namespace ns: an
// approver or admin role there or under "*", or a global admin.
func canApprove(f policy.PolicyFile, ns string) bool {
	if len(f.Admins) > 0 {
		return true
	}
	for _, key := range []string{ns, policy.AnyNamespace} {
		roles := f.Namespaces[key].Roles
		if slices.ContainsFunc(append(roles[policy.RoleApprover], roles[policy.RoleAdmin]...), func(s string) bool { return strings.TrimSpace(s) != "" }) {
			return true
		}
	}
	return false
}

// ReadTokensFile reads a tokens file without indexing it; a missing file
// is nil.
func ReadTokensFile(path string) (*TokensFile, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f TokensFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return &f, nil
}

// CheckPolicyFile is CheckPolicy of the file at path, with the tokens file
// at tokensPath when there is one.
func CheckPolicyFile(path, tokensPath string) (PolicyReport, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return PolicyReport{}, err
	}
	tokens, err := ReadTokensFile(tokensPath)
	if err != nil {
		return PolicyReport{}, err
	}
	return CheckPolicy(data, tokens)
}
