package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindTrigger is the kind of a runnable started by an event.
const KindTrigger = "Trigger"

// Labels and annotations the trigger loop puts on each runnable a trigger
// creates: which trigger, how many trigger hops led to it (a chain of
// triggers is bounded by MaxTriggerChain), and which event.
const (
	LabelTrigger      = "purser.io/trigger"
	LabelTriggerChain = "purser.io/trigger-chain"
	// AnnotationTriggerEvent says in words which event started the run.
	AnnotationTriggerEvent = "purser.io/trigger-event"
)

// Bounds of a trigger. A trigger's name, with the suffix of its runs'
// names ("-" and EventHashLength hex digits), must stay a label value of
// at most 63 characters: the run's object takes the run's name, and a
// Job's name is a label of its pods.
const (
	EventHashLength       = 12
	MaxTriggerNameLength  = 63 - 1 - EventHashLength
	MaxTriggerPhases      = 8
	MaxIdempotencyKeyLen  = 256
	MaxTriggerLastRuns    = 10
	MaxTriggerChain       = 10
	triggerSourcesAllowed = "runnableEnded, deployableRolledOut or webhook"
)

// Trigger creates a runnable from its template at each event of its one
// source, exactly once per event across the farm.
type Trigger struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta    `json:"metadata"`
	Spec     TriggerSpec   `json:"spec"`
	Status   TriggerStatus `json:"status,omitzero"`
}

// TriggerSpec is what the user asks for.
type TriggerSpec struct {
	// Source is the trigger's event source: exactly one of its fields. (Not
	// "on": YAML 1.1, which Kubernetes tools read, takes the key on as true.)
	Source TriggerSource `json:"source"`
	// Template is the spec of each runnable the trigger creates.
	Template RunnableSpec `json:"template"`
	// Suspend stops the trigger: events while it is suspended are not
	// run later (a webhook call is answered 409).
	Suspend bool `json:"suspend,omitempty"`
}

// TriggerSource holds exactly one event source.
type TriggerSource struct {
	RunnableEnded       *RunnableEndedSource       `json:"runnableEnded,omitempty"`
	DeployableRolledOut *DeployableRolledOutSource `json:"deployableRolledOut,omitempty"`
	Webhook             *WebhookSource             `json:"webhook,omitempty"`
}

// RunnableEndedSource fires when a runnable of the trigger's namespace
// ends in one of Phases (any ended phase when empty) and its labels match
// Selector (any runnable when nil).
type RunnableEndedSource struct {
	Phases   []Phase               `json:"phases,omitempty"`
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// IncludeOwnRuns lets the trigger fire on the end of its own runs;
	// it needs a selector, and the chain is bounded by MaxTriggerChain.
	IncludeOwnRuns bool `json:"includeOwnRuns,omitempty"`
}

// DeployableRolledOutSource fires when a deployable of the trigger's
// namespace, named Name or matching Selector, reaches a new generation
// on every one of its clusters.
type DeployableRolledOutSource struct {
	Name     string                `json:"name,omitempty"`
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// WebhookSource fires on each call of the trigger's webhook URL with the
// trigger's own token.
type WebhookSource struct{}

// TriggerStatus is what the trigger loop last did.
type TriggerStatus struct {
	LastFired *time.Time `json:"lastFired,omitempty"`
	// Fired counts the runnables the trigger created.
	Fired int64 `json:"fired,omitempty"`
	// LastRuns are the latest runs, newest first.
	LastRuns []TriggerRun `json:"lastRuns,omitempty"`
	Message  string       `json:"message,omitempty"`
	// Token is the webhook's token, shown once: in the answer to the PUT
	// that created the trigger and to a rotate-token. Never stored.
	Token string `json:"token,omitempty"`
	// WebhookPath is where the webhook is called.
	WebhookPath string `json:"webhookPath,omitempty"`
}

// TriggerRun is one run of a trigger.
type TriggerRun struct {
	Name  string    `json:"name"`
	Event string    `json:"event"`
	Phase Phase     `json:"phase,omitempty"`
	At    time.Time `json:"at"`
}

// EventRunName is the name of the runnable of an event: the trigger's
// name and a short hash of the event's identity, so that the name alone
// identifies the event (and a second creation of it finds it taken).
func EventRunName(trigger, eventID string) string {
	sum := sha256.Sum256([]byte(eventID))
	return trigger + "-" + hex.EncodeToString(sum[:])[:EventHashLength]
}

// Event identities: what makes two sightings of an event the same event.

// RunnableEndedEvent is the end of attempt number attempts of the
// runnable of uid: a rerun that ends again is a new event.
func RunnableEndedEvent(uid string, attempts int) string {
	return "runnable/" + uid + "/" + strconv.Itoa(attempts)
}

// DeployableRolledOutEvent is generation of the deployable of uid
// rolled out everywhere (the uid, not the name: a deployable deleted and
// made again starts its generations again).
func DeployableRolledOutEvent(uid string, generation int64) string {
	return "deployable/" + uid + "/" + strconv.FormatInt(generation, 10)
}

// WebhookEvent is a call of trigger uid's webhook with key, the caller's
// Idempotency-Key (or a fresh id when it gave none).
func WebhookEvent(triggerUID, key string) string {
	return "webhook/" + triggerUID + "/" + key
}

// RunnableAt is the runnable the trigger creates under name, with its
// labels: the trigger's own and extra.
func (t *Trigger) RunnableAt(name string, extra map[string]string) *Runnable {
	labels := map[string]string{}
	for k, v := range t.Metadata.Labels {
		labels[k] = v
	}
	for k, v := range extra {
		labels[k] = v
	}
	if len(labels) == 0 {
		labels = nil
	}
	return &Runnable{
		TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindRunnable},
		Metadata: ObjectMeta{Name: name, Namespace: t.Metadata.Namespace, Labels: labels},
		Spec:     t.Spec.Template,
	}
}

// RunLabels are the labels of a trigger's run at hop chain.
func RunLabels(trigger string, chain int) map[string]string {
	return map[string]string{LabelTrigger: trigger, LabelTriggerChain: strconv.Itoa(chain)}
}

// SetDefaults fills the template's unset fields as a runnable's.
func (t *Trigger) SetDefaults() {
	r := t.RunnableAt("", nil)
	r.SetDefaults()
	t.Spec.Template = r.Spec
}

// ValidateTrigger returns every problem with t as written; now is the
// time a template's deadline must lie after. The template is checked as
// the runnable of an event would be, its problems named under
// spec.template.
func ValidateTrigger(t *Trigger, now time.Time) FieldErrors {
	var v validator
	v.typeMeta(t.TypeMeta, KindTrigger)
	v.objectMeta(t.Metadata, metaRules{kind: KindTrigger, namespaced: true, nameIsLabel: true})
	if len(t.Metadata.Name) > MaxTriggerNameLength {
		v.add("metadata.name", "is %d characters long; a trigger's name is at most %d, so that its runs' names (<trigger>-<event hash>) stay valid",
			len(t.Metadata.Name), MaxTriggerNameLength)
	}
	on := t.Spec.Source
	n := 0
	if s := on.RunnableEnded; s != nil {
		n++
		if len(s.Phases) > MaxTriggerPhases {
			v.add("spec.source.runnableEnded.phases", "lists %d phases; at most %d", len(s.Phases), MaxTriggerPhases)
		}
		for i, p := range s.Phases {
			if !p.Terminal() {
				v.add("spec.source.runnableEnded.phases["+strconv.Itoa(i)+"]", "%s is not a phase a runnable ends in (Succeeded, Failed, Cancelled, Expired, Rejected)", quote(string(p)))
			}
		}
		v.selector("spec.source.runnableEnded.selector", s.Selector)
		if s.IncludeOwnRuns && (s.Selector == nil || (len(s.Selector.MatchLabels) == 0 && len(s.Selector.MatchExpressions) == 0)) {
			// A trigger on every end of its own runs restarts forever;
			// with a selector the template's labels must match it on
			// purpose, and the chain is bounded still.
			v.add("spec.source.runnableEnded.includeOwnRuns", "needs a non-empty selector: a trigger on the end of every one of its own runs would start one after another without end (chains stop after %d hops anyway)", MaxTriggerChain)
		}
	}
	if s := on.DeployableRolledOut; s != nil {
		n++
		if s.Name == "" && s.Selector == nil {
			v.add("spec.source.deployableRolledOut", "set name or selector")
		}
		if s.Name != "" && s.Selector != nil {
			v.add("spec.source.deployableRolledOut", "set name or selector, not both")
		}
		if s.Name != "" {
			v.name("spec.source.deployableRolledOut.name", s.Name, false)
		}
		v.selector("spec.source.deployableRolledOut.selector", s.Selector)
	}
	if on.Webhook != nil {
		n++
	}
	switch {
	case n == 0:
		v.add("spec.source", "is required: one of %s", triggerSourcesAllowed)
	case n > 1:
		v.add("spec.source", "sets %d sources; set exactly one of %s", n, triggerSourcesAllowed)
	}
	if md, ok := t.Spec.Template.Template["metadata"].(map[string]any); ok && (md["name"] != nil || md["generateName"] != nil) {
		// Each event's object is named after its runnable, which is
		// named after the event: one fixed name would make two runs the
		// same object.
		v.add("spec.template.template.metadata.name", "must be unset in a trigger: each run's object is named after its runnable (<trigger>-<event hash>)")
	}
	name := t.Metadata.Name
	if len(content.IsDNS1123Label(name)) > 0 || name == "" || len(name) > MaxTriggerNameLength {
		name = "trigger"
	}
	r := t.RunnableAt(EventRunName(name, "validate"), RunLabels(name, MaxTriggerChain))
	if t.Metadata.Namespace == "" {
		r.Metadata.Namespace = "default" // said once, above
	}
	for _, e := range ValidateRunnable(r, now) {
		if !strings.HasPrefix(e.Field, "spec.") {
			continue // metadata: the trigger's own, said above
		}
		v.errs = append(v.errs, FieldError{Field: TemplateField(e.Field), Message: e.Message})
	}
	return v.errs
}

func (v *validator) selector(field string, s *metav1.LabelSelector) {
	if s == nil {
		return
	}
	if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
		v.add(field, "%s", err.Error())
	}
}

// DecodeTrigger decodes a Trigger strictly, as the other kinds.
func DecodeTrigger(data []byte, contentType string) (*Trigger, error) {
	obj, err := decode(data, contentType, KindTrigger)
	if err != nil {
		return nil, err
	}
	return obj.(*Trigger), nil
}
