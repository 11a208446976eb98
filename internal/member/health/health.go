// Package health turns a Kubernetes object, as a member cluster reports it,
// into purser's judgement of it: Healthy, Unhealthy or Unknown, a phase
// (Pending, Running, Succeeded, Failed) and a one-line message.
//
// It is the decision half of application health. The ingester calls it for
// every object it records so that a Runnable shows how its object is doing;
// the failover controller acts on the stored judgement, moving work only
// when it is Unhealthy. Both must reach the same verdict from the same
// object, so the package is pure: no clients, no clock, no mutable state.
// Kinds purser knows (Job, Argo Workflow, Deployment, StatefulSet,
// FlinkDeployment, the last as internal/flink judges it) have built-in
// interpreters; any kind can be given CEL rules in the configuration, and
// a rule replaces the built-in for its kind.
// The only I/O is reading a rules file and the objects of `purser health -f`.
package health

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/flink"
	"github.com/purser-io/purser/internal/platform/fields"
)

// Phases of an object. They describe the object on its cluster, not the
// Runnable: the ingester maps them onto the Runnable's own phases, which
// have no Pending (a Runnable that is on a cluster is at least Submitted).
// Unobserved is an object whose controller has not written any status
// yet (v1alpha1.ObjectUnobserved).
const (
	PhaseUnobserved = v1alpha1.ObjectUnobserved
	PhasePending    = "Pending"
	PhaseRunning    = string(v1alpha1.PhaseRunning)
	PhaseSucceeded  = string(v1alpha1.PhaseSucceeded)
	PhaseFailed     = string(v1alpha1.PhaseFailed)
)

// maxMessage caps a Result's message in bytes. Operators put whole stack
// traces in their status (Flink's status.error does); the message is stored
// on the Runnable and printed on one line, where the first kilobyte says
// what went wrong.
const maxMessage = 1024

// Result is the judgement of one object.
type Result struct {
	// Health is typed as the API's Health so that the ingester can store it
	// on a Runnable without a conversion that could let other values in.
	Health v1alpha1.Health
	// Phase is one of the Phase constants, or empty for an object that
	// has none. Health is empty for an object without status.
	Phase   string
	Message string
	// UserError says that the object cannot become healthy on any cluster
	// until its owner changes it (a wrong image, a crashing entry point).
	// Health is then Unknown, never Unhealthy, so that nothing that fails
	// over on Unhealthy moves it; this field says why, for callers that want
	// to show it without reading the message.
	UserError bool
}

// interpretFunc judges one kind. It may assume obj is a map but nothing
// about what is in it.
type interpretFunc func(obj map[string]any) Result

// gvk names a kind the way rules and built-ins are looked up.
type gvk struct{ apiVersion, kind string }

// Interpreter judges objects of any kind. It is immutable after New, so one
// Interpreter may be shared by every goroutine of a component.
type Interpreter struct {
	// exact holds rules for one apiVersion, group rules written for
	// "group/*" keyed by group and kind. Lookup tries exact, then group,
	// then the built-ins: a rule for one version can refine a rule for the
	// whole group, and any rule replaces the built-in, even a group rule,
	// since whoever wrote it for a built-in kind meant it to apply.
	exact, group map[gvk]interpretFunc
}

// builtins lists the kinds purser judges without configuration.
var builtins = map[gvk]interpretFunc{
	{"batch/v1", "Job"}:                      interpretJob,
	{"argoproj.io/v1alpha1", "Workflow"}:     interpretWorkflow,
	{"apps/v1", "Deployment"}:                interpretDeployment,
	{"apps/v1", "StatefulSet"}:               interpretStatefulSet,
	{flink.APIVersion, flink.KindDeployment}: interpretFlinkDeployment,
	{"v1", "Node"}:                           interpretNode,
}

// New compiles rules once and returns an Interpreter that uses them before
// the built-ins. An error names the rule (by position, apiVersion and kind)
// and the field whose expression is wrong.
func New(rules []Rule) (*Interpreter, error) {
	in := &Interpreter{
		exact: make(map[gvk]interpretFunc, len(rules)),
		group: make(map[gvk]interpretFunc),
	}
	if len(rules) == 0 {
		return in, nil
	}
	env, err := newRuleEnv()
	if err != nil {
		return nil, fmt.Errorf("health rules: %w", err)
	}
	seen := make(map[gvk]int, len(rules))
	for i, r := range rules {
		cr, err := compileRule(env, r)
		if err != nil {
			return nil, fmt.Errorf("healthRules[%d] (%s): %w", i, r.describe(), err)
		}
		key := gvk{r.APIVersion, r.Kind}
		// Two rules for the same kind would make the winner depend on the
		// order of the file; refuse instead of guessing.
		if j, dup := seen[key]; dup {
			return nil, fmt.Errorf("healthRules[%d] (%s): same apiVersion and kind as healthRules[%d]", i, r.describe(), j)
		}
		seen[key] = i
		if group, ok := strings.CutSuffix(r.APIVersion, "/*"); ok {
			in.group[gvk{group, r.Kind}] = cr.interpret
		} else {
			in.exact[key] = cr.interpret
		}
	}
	return in, nil
}

// Interpret judges obj, the decoded JSON of a Kubernetes object as
// unstructured.Unstructured.Object holds it (callers with an Unstructured
// pass its Object). A map rather than an Unstructured because that is what
// every caller has: the inventory and RunnableStatus.Result keep decoded
// JSON, and the CLI decodes YAML to it; none of them needs to build a
// wrapper to ask.
//
// Interpret never panics and always returns a valid Health and Phase: a
// malformed object or a failing rule gives Unknown with a message saying
// why. Both are empty for an object that has none: a kind without status
// (a ConfigMap) has neither, a Node has a health and no phase, and a kind
// no interpreter knows is Unknown without a phase. A nil Interpreter uses
// the built-ins only.
func (i *Interpreter) Interpret(obj map[string]any) (res Result) {
	defer func() {
		// Every interpreter reads its input defensively, and CEL recovers
		// its own panics; this is the last guard, because one odd object
		// must never stop the ingester that calls Interpret for all of them.
		if p := recover(); p != nil {
			res = Result{Health: v1alpha1.HealthUnknown, Phase: PhasePending, Message: fmt.Sprintf("internal error judging object: %v", p)}
		}
		res.Message = clip(res.Message)
	}()
	apiVersion, kind := fields.String(obj, "apiVersion"), fields.String(obj, "kind")
	if apiVersion == "" || kind == "" {
		return unknown("object has no apiVersion or kind")
	}
	if f := i.rule(apiVersion, kind); f != nil {
		// A rule sees the whole object, deletionTimestamp included, and
		// decides for itself.
		return f(obj)
	}
	if stateless[gvk{apiVersion, kind}] {
		return interpretStateless(kind)
	}
	f := builtins[gvk{apiVersion, kind}]
	if f == nil {
		// Unknown, and no phase either: nothing says it waits.
		return Result{Health: v1alpha1.HealthUnknown, Message: fmt.Sprintf("no health interpreter for %s %s", apiVersion, kind)}
	}
	return terminating(obj, f(obj))
}

// rule finds the configured rule for a kind, exact apiVersion first.
func (i *Interpreter) rule(apiVersion, kind string) interpretFunc {
	if i == nil {
		return nil
	}
	if f := i.exact[gvk{apiVersion, kind}]; f != nil {
		return f
	}
	group, _, _ := strings.Cut(apiVersion, "/")
	return i.group[gvk{group, kind}]
}

// terminating makes the phase of an object that is being deleted say so;
// an object without a phase (a Node) keeps none.
// Health is kept: whoever deletes an object (purser purging an old copy, or
// its owner) means it to go, and an Unhealthy verdict here would make the
// failover controller resurrect it elsewhere. A phase that is already final
// stays, since the object did finish before it was deleted.
func terminating(obj map[string]any, res Result) Result {
	ts := fields.String(obj, "metadata", "deletionTimestamp")
	if ts == "" || res.Phase == "" || res.Phase == PhaseSucceeded || res.Phase == PhaseFailed {
		return res
	}
	res.Phase = PhaseFailed
	msg := "terminating since " + ts
	if res.Message != "" {
		msg += ": " + res.Message
	}
	res.Message = msg
	return res
}

func unknown(msg string) Result {
	return Result{Health: v1alpha1.HealthUnknown, Phase: PhasePending, Message: msg}
}

func healthy(phase, msg string) Result {
	return Result{Health: v1alpha1.HealthHealthy, Phase: phase, Message: msg}
}

func unhealthy(phase, msg string) Result {
	return Result{Health: v1alpha1.HealthUnhealthy, Phase: phase, Message: msg}
}

// breaksLine reports the runes that could split or garble a line: every
// space but the plain one, and control characters.
func breaksLine(r rune) bool {
	return r != ' ' && (unicode.IsSpace(r) || unicode.IsControl(r))
}

// clip keeps a message on one line and under maxMessage bytes, cutting on a
// rune boundary so that it stays valid UTF-8 for the API's JSON.
func clip(s string) string {
	if strings.ContainsFunc(s, breaksLine) {
		s = strings.Join(strings.FieldsFunc(s, breaksLine), " ")
	}
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// ByKind judges an object by its kind alone, without the object, when
// its kind needs nothing more (ok): a kind that no rule and no built-in
// judges (a ConfigMap: two records in five at 100 clusters) is judged by
// apiVersion and kind as Interpret would judge it. The ingester asks
// before it decodes an event, so that such an object is only scanned,
// never decoded (docs/benchmarks.md, "The inventory at design size").
func (i *Interpreter) ByKind(apiVersion, kind string) (health, phase string, ok bool) {
	k := gvk{apiVersion, kind}
	if apiVersion == "" || kind == "" || i.rule(apiVersion, kind) != nil || builtins[k] != nil {
		return "", "", false
	}
	if stateless[k] {
		r := interpretStateless(kind)
		return string(r.Health), r.Phase, true
	}
	return string(v1alpha1.HealthUnknown), "", true
}

// Judge is Interpret for a caller that keeps only health and phase.
func (i *Interpreter) Judge(obj map[string]any) (health, phase string) {
	r := i.Interpret(obj)
	return string(r.Health), r.Phase
}
