package health

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
)

// ObjectVariable is the CEL variable that holds the object being judged,
// as a map decoded from its JSON.
const ObjectVariable = "object"

// Limits on rules. A rules file is trusted configuration, but a rule runs
// for every object the ingester records, so a mistaken expression (a
// comprehension over a large list in a list) must cost an error, not a
// stalled ingester.
const (
	maxRuleExpressionLength = 4096
	ruleCostLimit           = 1_000_000
)

// Rule judges one kind with CEL expressions over `object`, each giving a
// string. It replaces the built-in interpreter for its kind.
type Rule struct {
	// APIVersion is exact ("apps/v1") or a whole group ("example.com/*").
	// A rule for an exact apiVersion wins over one for its group.
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Health must give Healthy, Unhealthy or Unknown.
	Health string `json:"health"`
	// Phase must give Pending, Running, Succeeded or Failed.
	Phase string `json:"phase"`
	// Message is optional.
	Message string `json:"message,omitempty"`
}

func (r Rule) describe() string { return r.APIVersion + " " + r.Kind }

// compiledRule holds a rule's programs, built once in New so that judging
// an object only evaluates them.
type compiledRule struct {
	name                   string
	health, phase, message cel.Program
}

// newRuleEnv declares `object` and the extensions rule authors reach for
// with Kubernetes objects: optional field access (object.?status.?phase)
// for fields a controller has not written yet, and string functions.
func newRuleEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable(ObjectVariable, cel.MapType(cel.StringType, cel.DynType)),
		cel.OptionalTypes(),
		ext.Strings(),
		cel.ParserExpressionSizeLimit(maxRuleExpressionLength),
	)
}

func compileRule(env *cel.Env, r Rule) (*compiledRule, error) {
	if r.Kind == "" {
		return nil, fmt.Errorf("kind: required")
	}
	if r.APIVersion == "" || r.APIVersion == "*" || strings.HasPrefix(r.APIVersion, "/") ||
		strings.Contains(strings.TrimSuffix(r.APIVersion, "/*"), "*") {
		return nil, fmt.Errorf("apiVersion: %q must be an exact apiVersion or group/*", r.APIVersion)
	}
	cr := &compiledRule{name: r.describe()}
	var err error
	if cr.health, err = compileField(env, "health", r.Health, true); err != nil {
		return nil, err
	}
	if cr.phase, err = compileField(env, "phase", r.Phase, true); err != nil {
		return nil, err
	}
	if cr.message, err = compileField(env, "message", r.Message, false); err != nil {
		return nil, err
	}
	return cr, nil
}

// compileField compiles one expression of a rule; the error starts with the
// field's name, so that together with New's prefix it points at one line
// of the rules file.
func compileField(env *cel.Env, field, expr string, required bool) (cel.Program, error) {
	if strings.TrimSpace(expr) == "" {
		if required {
			return nil, fmt.Errorf("%s: required", field)
		}
		return nil, nil
	}
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		msgs := make([]string, 0, len(iss.Errors()))
		for _, e := range iss.Errors() {
			// The parser lists every token it could have taken; the
			// position and the token it found say enough.
			msg, _, _ := strings.Cut(e.Message, " expecting {")
			msgs = append(msgs, fmt.Sprintf("%d:%d: %s", e.Location.Line(), e.Location.Column()+1, msg))
		}
		return nil, fmt.Errorf("%s: invalid CEL expression: %s", field, strings.Join(msgs, "; "))
	}
	if out := ast.OutputType(); !out.IsExactType(cel.StringType) && !out.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("%s: must give a string, not %s", field, out)
	}
	prg, err := env.Program(ast, cel.CostLimit(ruleCostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return prg, nil
}

var (
	healthValues = []string{string(v1alpha1.HealthHealthy), string(v1alpha1.HealthUnhealthy), string(v1alpha1.HealthUnknown)}
	phaseValues  = []string{PhasePending, PhaseRunning, PhaseSucceeded, PhaseFailed}
)

// interpret evaluates the rule. A rule that fails on an object (a missing
// field read without has() or ?., a value outside the allowed ones) says
// nothing about the object, so the verdict is Unknown, which moves
// nothing, with the rule and field named so that its author can fix it.
func (cr *compiledRule) interpret(obj map[string]any) Result {
	vars := map[string]any{ObjectVariable: obj}
	health, err := evalString(cr.health, vars, "health", healthValues)
	if err != nil {
		return unknown(fmt.Sprintf("health rule %s: %v", cr.name, err))
	}
	phase, err := evalString(cr.phase, vars, "phase", phaseValues)
	if err != nil {
		return unknown(fmt.Sprintf("health rule %s: %v", cr.name, err))
	}
	var msg string
	if cr.message != nil {
		if msg, err = evalString(cr.message, vars, "message", nil); err != nil {
			// The verdict stands; only its explanation is missing.
			msg = fmt.Sprintf("health rule %s: %v", cr.name, err)
		}
	}
	return Result{Health: v1alpha1.Health(health), Phase: phase, Message: msg}
}

// evalString runs prg and checks that it gave a string, one of allowed
// when allowed is not nil.
func evalString(prg cel.Program, vars map[string]any, field string, allowed []string) (string, error) {
	val, _, err := prg.Eval(vars)
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	s, ok := stringValue(val)
	if !ok {
		return "", fmt.Errorf("%s: gave %s, want a string", field, val.Type().TypeName())
	}
	if allowed != nil && !slices.Contains(allowed, s) {
		return "", fmt.Errorf("%s: gave %q, want one of %s", field, s, strings.Join(allowed, ", "))
	}
	return s, nil
}

func stringValue(val ref.Val) (string, bool) {
	s, ok := val.(types.String)
	return string(s), ok
}

// LoadRules reads health rules from a YAML (or JSON) file:
//
//	healthRules:
//	- apiVersion: example.com/*
//	  kind: Widget
//	  health: 'object.?status.?ready.orValue(false) ? "Healthy" : "Unhealthy"'
//	  phase: '"Running"'
//	  message: 'object.?status.?message.orValue("")'
//
// Other top-level keys are ignored, so that the rules can share a file with
// the rest of a component's configuration; keys inside a rule are checked,
// because a misspelt "helth" would otherwise silently drop a rule's
// verdict. The rules are only read here: New compiles them.
func LoadRules(path string) ([]Rule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("health rules: %w", err)
	}
	var file struct {
		HealthRules []json.RawMessage `json:"healthRules"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("health rules %s: %w", path, err)
	}
	rules := make([]Rule, 0, len(file.HealthRules))
	for i, raw := range file.HealthRules {
		var r Rule
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("health rules %s: healthRules[%d]: %w", path, i, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// Load returns the Interpreter of the built-ins and the rules of
// rulesFile, or of the built-ins alone when rulesFile is empty: the one
// way the ingester and `purser health` get theirs.
func Load(rulesFile string) (*Interpreter, error) {
	if rulesFile == "" {
		return New(nil)
	}
	rules, err := LoadRules(rulesFile)
	if err != nil {
		return nil, err
	}
	return New(rules)
}
