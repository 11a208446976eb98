package v1alpha1

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/api/validate/content"
)

// KindSchedule is the kind of a runnable started on a timetable.
const KindSchedule = "Schedule"

// Labels the scheduler puts on each runnable a schedule creates: which
// schedule, and which tick (RFC 3339 in UTC with ':' written '-', since a
// label value may not hold ':').
const (
	LabelSchedule      = "purser.io/schedule"
	LabelScheduledTime = "purser.io/scheduled-time"
)

// Concurrency policies: what a tick does while a run of the schedule is
// active, as Kubernetes' CronJob.
const (
	ConcurrencyAllow   = "Allow"
	ConcurrencyForbid  = "Forbid"
	ConcurrencyReplace = "Replace"
)

// Catch-up policies: what becomes of the ticks that passed while purser
// itself was not running.
const (
	CatchUpNone = "None"
	CatchUpLast = "Last"
	CatchUpAll  = "All"
)

// Defaults of a schedule.
const (
	DefaultSuccessfulRunsHistoryLimit int32 = 3
	DefaultFailedRunsHistoryLimit     int32 = 1
)

// Bounds of a schedule's fields: a cron expression is five short fields,
// and a schedule's name, with the suffix of its runs' names, must stay a
// label value, at most 63 characters: the run's object takes the run's
// name, and a Job's name is a label of its pods (a Job of a longer name
// is refused by the member cluster). The longest suffix is a run by
// hand's, "-manual-" and ten digits of Unix seconds (until 2286), so 45,
// where a CronJob, whose Jobs have an eleven-character suffix, has 52.
const (
	MaxScheduleLength     = 256
	MaxScheduleNameLength = 63 - len("-manual-") - 10
	// MaxCatchUpTicks bounds the ticks one catch-up creates: a window of a
	// year of a schedule firing each minute would otherwise create half a
	// million runnables at once.
	MaxCatchUpTicks = 100
	// MaxHistoryLimit bounds the runs of each kind a schedule keeps.
	MaxHistoryLimit = 100
)

// Schedule creates a runnable from its template at each tick of a cron
// expression, exactly once per tick across the farm.
type Schedule struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta     `json:"metadata"`
	Spec     ScheduleSpec   `json:"spec"`
	Status   ScheduleStatus `json:"status,omitzero"`
}

// ScheduleSpec is what the user asks for.
type ScheduleSpec struct {
	// Schedule is a standard five-field cron expression (minute hour
	// day-of-month month day-of-week), read in TimeZone.
	Schedule string `json:"schedule"`
	// TimeZone is an IANA time zone name; empty means UTC.
	TimeZone string `json:"timeZone,omitempty"`
	// Template is the spec of each runnable the schedule creates.
	Template RunnableSpec `json:"template"`
	// ConcurrencyPolicy: Allow (default), Forbid (skip a tick while a run
	// is active) or Replace (cancel the active runs, then create).
	ConcurrencyPolicy string `json:"concurrencyPolicy,omitempty"`
	// StartingDeadlineSeconds: a tick the scheduler reaches later than
	// this after its time is missed, not run.
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`
	// CatchUp says what becomes of ticks missed while purser was down.
	CatchUp *CatchUp `json:"catchUp,omitempty"`
	// Suspend stops the ticks; the ticks passed while suspended are not
	// caught up.
	Suspend bool `json:"suspend,omitempty"`
	// History limits: how many ended runs of each outcome are kept; the
	// older ones are deleted.
	SuccessfulRunsHistoryLimit *int32 `json:"successfulRunsHistoryLimit,omitempty"`
	FailedRunsHistoryLimit     *int32 `json:"failedRunsHistoryLimit,omitempty"`
}

// CatchUp is the rule for ticks missed while purser was down: None skips
// them, Last runs the latest one, All runs each one; only ticks within
// WindowSeconds of now are considered (0: no bound but MaxCatchUpTicks).
type CatchUp struct {
	Policy        string `json:"policy,omitempty"`
	WindowSeconds int64  `json:"windowSeconds,omitempty"`
}

// ScheduleStatus is what the scheduler last did.
type ScheduleStatus struct {
	LastScheduleTime *time.Time `json:"lastScheduleTime,omitempty"`
	NextScheduleTime *time.Time `json:"nextScheduleTime,omitempty"`
	// Active names the schedule's runnables that have not ended.
	Active []ScheduleRunRef `json:"active,omitempty"`
	// LastRuns are the latest runs, newest first, with their phases.
	LastRuns []ScheduleRun `json:"lastRuns,omitempty"`
	// Missed counts ticks not run: past their starting deadline, skipped
	// by Forbid, outside the catch-up rule, or refused.
	Missed  int64  `json:"missed,omitempty"`
	Message string `json:"message,omitempty"`
}

// ScheduleRunRef names one runnable of a schedule.
type ScheduleRunRef struct {
	Name string `json:"name"`
	UID  string `json:"uid,omitempty"`
}

// ScheduleRun is one run of a schedule.
type ScheduleRun struct {
	Name  string    `json:"name"`
	Tick  time.Time `json:"tick"`
	Phase Phase     `json:"phase"`
}

// ScheduleBackfill is the body of POST .../backfill: run the schedule's
// ticks in [From, To] now, as the timetable would have.
type ScheduleBackfill struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// MaxBackfillTicks bounds the ticks of one backfill: a day of a schedule
// firing each minute is 1,440; a longer interval is several calls.
const MaxBackfillTicks = 1000

// What a backfill did with a tick.
const (
	BackfillRun         = "Run"
	BackfillSkipped     = "Skipped"
	BackfillAlreadyDone = "AlreadyDone"
)

// ScheduleBackfillResult is what a backfill did, tick by tick, oldest
// first, with the counts of each outcome.
type ScheduleBackfillResult struct {
	Ticks       []BackfillTick `json:"ticks"`
	Run         int            `json:"run"`
	Skipped     int            `json:"skipped"`
	AlreadyDone int            `json:"alreadyDone"`
}

// BackfillTick is one tick of a backfill: its runnable's name, the
// outcome (Run, Skipped, AlreadyDone), and why when it did not run.
type BackfillTick struct {
	Tick    time.Time `json:"tick"`
	Name    string    `json:"name"`
	Outcome string    `json:"outcome"`
	Phase   Phase     `json:"phase,omitempty"`
	Message string    `json:"message,omitempty"`
}

// SetDefaults fills the schedule's unset fields, and its template's as a
// runnable's.
func (s *Schedule) SetDefaults() {
	if s.Spec.TimeZone == "" {
		s.Spec.TimeZone = "UTC"
	}
	if s.Spec.ConcurrencyPolicy == "" {
		s.Spec.ConcurrencyPolicy = ConcurrencyAllow
	}
	if s.Spec.CatchUp == nil {
		s.Spec.CatchUp = &CatchUp{}
	}
	if s.Spec.CatchUp.Policy == "" {
		s.Spec.CatchUp.Policy = CatchUpLast
	}
	if s.Spec.SuccessfulRunsHistoryLimit == nil {
		n := DefaultSuccessfulRunsHistoryLimit
		s.Spec.SuccessfulRunsHistoryLimit = &n
	}
	if s.Spec.FailedRunsHistoryLimit == nil {
		n := DefaultFailedRunsHistoryLimit
		s.Spec.FailedRunsHistoryLimit = &n
	}
	r := s.RunnableAt("", nil)
	r.SetDefaults()
	s.Spec.Template = r.Spec
}

// RunnableAt is the runnable the schedule creates under name, with its
// labels: the schedule's own and extra.
func (s *Schedule) RunnableAt(name string, extra map[string]string) *Runnable {
	labels := map[string]string{}
	for k, v := range s.Metadata.Labels {
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
		Metadata: ObjectMeta{Name: name, Namespace: s.Metadata.Namespace, Labels: labels},
		Spec:     s.Spec.Template,
	}
}

// ScheduledTimeLabel is a tick as the purser.io/scheduled-time label
// holds it.
func ScheduledTimeLabel(tick time.Time) string {
	return strings.ReplaceAll(tick.UTC().Format(time.RFC3339), ":", "-")
}

// TickRunName is the name of the runnable of a tick: the schedule's name
// and the tick in minutes since the epoch, as Kubernetes names a
// CronJob's Jobs, so that the name alone identifies the tick.
func TickRunName(schedule string, tick time.Time) string {
	return fmt.Sprintf("%s-%d", schedule, tick.Unix()/60)
}

// ManualRunName is the name of a run asked for by hand at t.
func ManualRunName(schedule string, t time.Time) string {
	return fmt.Sprintf("%s-manual-%d", schedule, t.Unix())
}

// cronParser reads the five standard fields only: no seconds, and no
// descriptors (@hourly, @every), which Kubernetes' CronJob accepts but
// which say nothing five fields cannot.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// ParseCron parses a schedule's cron expression in its time zone.
func ParseCron(expr, timeZone string) (cron.Schedule, *time.Location, error) {
	if len(expr) > MaxScheduleLength {
		return nil, nil, fmt.Errorf("is %d characters long; a cron expression is at most %d", len(expr), MaxScheduleLength)
	}
	trimmed := strings.TrimSpace(expr)
	if strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ=") {
		return nil, nil, fmt.Errorf("may not name a time zone (TZ= or CRON_TZ=); set spec.timeZone")
	}
	if strings.HasPrefix(trimmed, "@") {
		return nil, nil, fmt.Errorf("%s is a descriptor; write the five fields (minute hour day-of-month month day-of-week), e.g. \"0 * * * *\" for @hourly", quote(trimmed))
	}
	loc, err := LoadTimeZone(timeZone)
	if err != nil {
		return nil, nil, err
	}
	sched, err := cronParser.Parse(trimmed)
	if err != nil {
		return nil, nil, fmt.Errorf("is not a five-field cron expression: %w", err)
	}
	return sched, loc, nil
}

// LoadTimeZone reads an IANA time zone name; empty is UTC. Local is
// refused: it would be the time zone of whichever host runs the scheduler.
func LoadTimeZone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if name == "Local" || len(name) > 64 {
		return nil, fmt.Errorf("%s is not an IANA time zone name (e.g. Europe/Paris, UTC)", quote(name))
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%s is not an IANA time zone name (e.g. Europe/Paris, UTC)", quote(name))
	}
	return loc, nil
}

// ValidateSchedule returns every problem with s as written; now is the
// time a template's deadline must lie after. The template is checked as
// the runnable a tick would create, its problems named under
// spec.template.
func ValidateSchedule(s *Schedule, now time.Time) FieldErrors {
	var v validator
	v.typeMeta(s.TypeMeta, KindSchedule)
	v.objectMeta(s.Metadata, metaRules{kind: KindSchedule, namespaced: true, nameIsLabel: true})
	if len(s.Metadata.Name) > MaxScheduleNameLength {
		v.add("metadata.name", "is %d characters long; a schedule's name is at most %d, so that its runs' names and the label %s stay valid",
			len(s.Metadata.Name), MaxScheduleNameLength, LabelSchedule)
	}
	sp := &s.Spec
	if sp.Schedule == "" {
		v.add("spec.schedule", "is required: a five-field cron expression, e.g. \"*/5 * * * *\"")
	} else if _, _, err := ParseCron(sp.Schedule, "UTC"); err != nil {
		v.add("spec.schedule", "%v", err)
	}
	if _, err := LoadTimeZone(sp.TimeZone); err != nil {
		v.add("spec.timeZone", "%v", err)
	}
	if sched, loc, err := ParseCron(sp.Schedule, sp.TimeZone); err == nil && sched.Next(now.In(loc)).IsZero() {
		v.add("spec.schedule", "%s never fires (no such date within five years)", quote(sp.Schedule))
	}
	if sp.ConcurrencyPolicy != "" {
		v.enum("spec.concurrencyPolicy", sp.ConcurrencyPolicy, []string{ConcurrencyAllow, ConcurrencyForbid, ConcurrencyReplace})
	}
	if d := sp.StartingDeadlineSeconds; d != nil && (*d < 1 || *d > MaxTTLSecondsAfterFinished) {
		v.add("spec.startingDeadlineSeconds", "must be between 1 and %d", MaxTTLSecondsAfterFinished)
	}
	if c := sp.CatchUp; c != nil {
		if c.Policy != "" {
			v.enum("spec.catchUp.policy", c.Policy, []string{CatchUpNone, CatchUpLast, CatchUpAll})
		}
		if c.WindowSeconds < 0 || c.WindowSeconds > MaxTTLSecondsAfterFinished {
			v.add("spec.catchUp.windowSeconds", "must be between 0 (no bound) and %d", MaxTTLSecondsAfterFinished)
		}
	}
	v.historyLimit("spec.successfulRunsHistoryLimit", sp.SuccessfulRunsHistoryLimit)
	v.historyLimit("spec.failedRunsHistoryLimit", sp.FailedRunsHistoryLimit)
	if md, ok := sp.Template.Template["metadata"].(map[string]any); ok && (md["name"] != nil || md["generateName"] != nil) {
		// Each tick's object is named after its runnable, which is named
		// after the tick: one fixed name would make two runs (Allow, or a
		// Replace whose old copy is still being removed) the same object.
		v.add("spec.template.template.metadata.name", "must be unset in a schedule: each run's object is named after its runnable (<schedule>-<tick>)")
	}
	// The template, as the runnable of a tick: its name is the longest a
	// tick's or a manual run's can be.
	name := s.Metadata.Name
	if len(content.IsDNS1123Label(name)) > 0 || name == "" {
		name = "schedule"
	}
	r := s.RunnableAt(ManualRunName(name, now), map[string]string{LabelSchedule: name, LabelScheduledTime: ScheduledTimeLabel(now)})
	if s.Metadata.Namespace == "" {
		r.Metadata.Namespace = "default" // said once, above
	}
	for _, e := range ValidateRunnable(r, now) {
		if !strings.HasPrefix(e.Field, "spec.") {
			continue // metadata: the schedule's own, said above
		}
		v.errs = append(v.errs, FieldError{Field: TemplateField(e.Field), Message: e.Message})
	}
	return v.errs
}

// TemplateField is where a runnable's field (spec.x) sits in a schedule
// (spec.template.x).
func TemplateField(field string) string {
	if rest, ok := strings.CutPrefix(field, "spec."); ok {
		return "spec.template." + rest
	}
	return field
}

func (v *validator) historyLimit(field string, n *int32) {
	if n != nil && (*n < 0 || *n > MaxHistoryLimit) {
		v.add(field, "must be between 0 and %d", MaxHistoryLimit)
	}
}

// DecodeSchedule decodes a Schedule strictly, as the other kinds.
func DecodeSchedule(data []byte, contentType string) (*Schedule, error) {
	obj, err := decode(data, contentType, KindSchedule)
	if err != nil {
		return nil, err
	}
	return obj.(*Schedule), nil
}
