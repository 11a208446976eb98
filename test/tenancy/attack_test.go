package tenancy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/control/scheduler"
	"github.com/purser-io/purser/internal/domain/policy"
	"github.com/purser-io/purser/internal/hub/store"
)

// schedule is a Schedule of ns named name: spec holds the schedule's own
// fields (indented two spaces, after spec:), runSpec the template's
// runnable fields beside its object (indented four), tmpl the object
// (indented six).
func schedule(ns, name, spec, runSpec, tmpl string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: purser.io/v1alpha1\nkind: Schedule\nmetadata: {name: %s, namespace: %s}\nspec:\n", name, ns)
	if !strings.Contains(spec, "schedule:") {
		b.WriteString("  schedule: \"*/5 * * * *\"\n")
	}
	b.WriteString(spec)
	b.WriteString("  template:\n")
	b.WriteString(runSpec)
	b.WriteString("    template:\n")
	for line := range strings.Lines(tmpl) {
		b.WriteString("      " + line)
	}
	return b.String()
}

// testAttack: today's surfaces (schedules, the opaque rule for kinds
// without a driver, /k8s refusals) tried as mallory, editor of her own
// namespace and of the approval namespace, would.
func testAttack(t *testing.T, f *farm) {
	schedPath := func(ns, name string) string { return "/api/v1/schedules/" + ns + "/" + name }
	schedules := func() int {
		var n int
		if err := f.raw.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM schedules").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// A priority class the policy gives only the victim's namespace, or an
	// integer (an admin's), through a schedule's template: the tick would
	// put her work ahead of everyone's.
	t.Run("ScheduleOtherTenantsPriorityClass", func(t *testing.T) {
		for what, prio := range map[string]string{"the victim's class": "critical", "a raw integer": "2147483647"} {
			before := schedules()
			a := f.refused("a schedule with "+what, http.StatusUnprocessableEntity, func() answer {
				return f.yaml("mallory", "PUT", schedPath(f.own, "prio"), schedule(f.own, "prio", "", "    priority: "+prio+"\n", job))
			})
			if !strings.Contains(string(a.raw), `"field":"spec.template.priority"`) {
				t.Errorf("%s: the 422 does not name spec.template.priority: %s", what, a.raw)
			}
			if schedules() != before {
				t.Errorf("%s: the schedule was stored", what)
			}
		}
	})

	// Failover mutations that render a privileged pod for a later attempt:
	// judged at PUT as the tick's runnable would be.
	t.Run("ScheduleMutationRendersPrivileged", func(t *testing.T) {
		before := schedules()
		a := f.refused("a schedule whose failover mutation sets hostPID", http.StatusUnprocessableEntity, func() answer {
			return f.yaml("mallory", "PUT", schedPath(f.own, "mut"), schedule(f.own, "mut", "",
				"    failover:\n      mutations: [{when: \"true\", path: spec.template.spec.hostPID, value: \"true\"}]\n", job))
		})
		if !strings.Contains(string(a.raw), "spec.template.failover.mutations[0]") || !strings.Contains(string(a.raw), "hostPID=true") {
			t.Errorf("the 422 does not name the mutation and the rule: %s", a.raw)
		}
		if schedules() != before {
			t.Error("the schedule was stored")
		}
	})

	// Kinds without a driver, the case of a kind, a built-in kind's name in
	// another group, and Lists, in a schedule's template: the same rule as
	// a runnable's.
	t.Run("ScheduleOfAnUndrivenKind", func(t *testing.T) {
		a := f.refused("a schedule of a Gizmo", http.StatusUnprocessableEntity, func() answer {
			return f.yaml("mallory", "PUT", schedPath(f.own, "gizmo"), schedule(f.own, "gizmo", "", "",
				"apiVersion: example.com/v1\nkind: Gizmo\nspec: {podTemplate: {spec: {hostPID: true}}}\n"))
		})
		if !strings.Contains(string(a.raw), "no driver for kind Gizmo.example.com") {
			t.Errorf("the 422 does not name the kind: %s", a.raw)
		}
	})

	// Names: a schedule's name too long for its runs' names, and the
	// longest allowed, whose runs (a tick's and one by hand) must be names
	// a member cluster accepts for a Job (at most 63 characters: a Job's
	// name is a label of its pods).
	t.Run("ScheduleNameLengths", func(t *testing.T) {
		long := strings.Repeat("s", v1alpha1.MaxScheduleNameLength+1)
		f.refused("a schedule name one character too long", http.StatusUnprocessableEntity, func() answer {
			return f.yaml("mallory", "PUT", schedPath(f.own, long), schedule(f.own, long, "", "", job))
		})
		longest := strings.Repeat("l", v1alpha1.MaxScheduleNameLength)
		now := time.Now()
		for what, name := range map[string]string{
			"a tick's run":    v1alpha1.TickRunName(longest, now.AddDate(10, 0, 0)),
			"a run by hand's": v1alpha1.ManualRunName(longest, now.AddDate(10, 0, 0)),
		} {
			if len(name) > 63 {
				t.Errorf("%s name of a schedule of %d characters is %d long (%s): no member cluster takes a Job of that name", what, len(longest), len(name), name)
			}
		}
		// And as the cluster sees it: a run by hand of the schedule of the
		// longest name becomes a Job there.
		f.yaml("mallory", "PUT", schedPath(f.own, longest), schedule(f.own, longest, "  suspend: true\n", "", job)).want(t, http.StatusCreated)
		run := f.do("mallory", "POST", schedPath(f.own, longest)+"/run", nil).want(t, http.StatusAccepted)
		name := run.str("metadata", "name")
		kube, err := f.cluster.Client()
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the run by hand of "+longest+" on the cluster", func() error {
			if _, err := kube.BatchV1().Jobs(f.own).Get(t.Context(), name, metav1.GetOptions{}); err == nil {
				return nil
			}
			r, err := f.runnableRow(name)
			if err != nil {
				return err
			}
			if v1alpha1.Phase(r.Phase).Terminal() {
				t.Fatalf("the run by hand %s (%d characters) ended %s without a Job on the cluster: %s", name, len(name), r.Phase,
					f.do("mallory", "GET", "/api/v1/runnables/"+f.own+"/"+name, nil).raw)
			}
			return fmt.Errorf("runnable %s is %s", name, r.Phase)
		})
		f.do("mallory", "DELETE", schedPath(f.own, longest), nil).want(t, http.StatusOK)
	})

	// Cron expressions and time zones a tenant may write: each a 422 that
	// names the field, quickly, and nothing stored.
	t.Run("PathologicalTimetables", func(t *testing.T) {
		for _, c := range []struct{ what, spec, field string }{
			{"a step of zero", "  schedule: \"*/0 * * * *\"\n", "spec.schedule"},
			{"a date that never comes", "  schedule: \"0 0 30 2 *\"\n", "spec.schedule"},
			{"a minute out of range", "  schedule: \"60 * * * *\"\n", "spec.schedule"},
			{"a reversed range", "  schedule: \"59-0 * * * *\"\n", "spec.schedule"},
			{"six fields", "  schedule: \"0 0 0 * * *\"\n", "spec.schedule"},
			{"a descriptor", "  schedule: \"@every 1s\"\n", "spec.schedule"},
			{"a time zone in the expression", "  schedule: \" CRON_TZ=Asia/Tokyo 0 * * * *\"\n", "spec.schedule"},
			{"257 characters", "  schedule: \"" + strings.Repeat("0,", 126) + "0 * * * *\"\n", "spec.schedule"},
			{"the host's zone", "  timeZone: Local\n", "spec.timeZone"},
			{"a path out of the zone database", "  timeZone: ../../../../etc/passwd\n", "spec.timeZone"},
			{"an absolute path", "  timeZone: /etc/localtime\n", "spec.timeZone"},
			{"a zone that is not one", "  timeZone: Europe/Atlantis\n", "spec.timeZone"},
			{"a negative history limit", "  successfulRunsHistoryLimit: -1\n", "spec.successfulRunsHistoryLimit"},
			{"a huge history limit", "  failedRunsHistoryLimit: 2147483647\n", "spec.failedRunsHistoryLimit"},
			{"a huge catch-up window", "  catchUp: {policy: All, windowSeconds: 9223372036854775807}\n", "spec.catchUp.windowSeconds"},
			{"a negative starting deadline", "  startingDeadlineSeconds: -5\n", "spec.startingDeadlineSeconds"},
		} {
			start := time.Now()
			a := f.refused(c.what, http.StatusUnprocessableEntity, func() answer {
				return f.yaml("mallory", "PUT", schedPath(f.own, "cron"), schedule(f.own, "cron", c.spec, "", job))
			})
			if !strings.Contains(string(a.raw), `"field":"`+c.field+`"`) {
				t.Errorf("%s: the 422 does not name %s: %s", c.what, c.field, a.raw)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("%s: took %s", c.what, d)
			}
		}
	})

	// The other doors of schedules: another tenant's schedule deleted, a
	// namespace no policy names, every namespace at once, an approver who
	// may not write running one by hand, and templates the kind rules and
	// the namespace rule refuse, as a runnable's are.
	t.Run("ScheduleDoors", func(t *testing.T) {
		f.yaml("victor", "PUT", schedPath(f.victim, "nightly"), schedule(f.victim, "nightly", "", "", job)).want(t, http.StatusCreated)
		f.refused("deleting the victim's schedule", http.StatusForbidden, func() answer {
			return f.do("mallory", "DELETE", schedPath(f.victim, "nightly"), nil)
		})
		f.refused("reading the victim's schedule", http.StatusForbidden, func() answer {
			return f.do("mallory", "GET", schedPath(f.victim, "nightly"), nil)
		})
		f.refused("a schedule in kube-system", http.StatusForbidden, func() answer {
			return f.yaml("mallory", "PUT", schedPath("kube-system", "s"), schedule("kube-system", "s", "", "", job))
		})
		f.refused("listing every namespace's schedules", http.StatusForbidden, func() answer {
			return f.do("mallory", "GET", "/api/v1/schedules", nil)
		})
		f.yaml("mallory", "PUT", schedPath(f.approval, "byhand"), schedule(f.approval, "byhand", "", "", job)).want(t, http.StatusCreated)
		f.refused("an approver who may not write running a schedule by hand", http.StatusForbidden, func() answer {
			return f.do("carol", "POST", schedPath(f.approval, "byhand")+"/run", nil)
		})
		f.do("mallory", "DELETE", schedPath(f.approval, "byhand"), nil).want(t, http.StatusOK)
		before := schedules()
		f.refused("a schedule of ClusterRoleBindings", http.StatusForbidden, func() answer {
			return f.yaml("mallory", "PUT", schedPath(f.own, "crb"), schedule(f.own, "crb", "", "",
				"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: User, name: mallory, apiGroup: rbac.authorization.k8s.io}]\n"))
		})
		f.refused("a schedule of RoleBindings, which her namespace denies", http.StatusForbidden, func() answer {
			return f.yaml("mallory", "PUT", schedPath(f.own, "rb"), schedule(f.own, "rb", "", "",
				"apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}\nsubjects: [{kind: User, name: mallory, apiGroup: rbac.authorization.k8s.io}]\n"))
		})
		f.refused("a schedule whose object lands in the victim's namespace", http.StatusUnprocessableEntity, func() answer {
			return f.yaml("mallory", "PUT", schedPath(f.own, "away"), schedule(f.own, "away", "", "",
				"apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: "+f.victim+"}\ndata: {k: v}\n"))
		})
		f.refused("a schedule of Secrets", http.StatusUnprocessableEntity, func() answer {
			return f.yaml("mallory", "PUT", schedPath(f.own, "sec"), schedule(f.own, "sec", "", "",
				"apiVersion: v1\nkind: Secret\nstringData: {password: hunter2}\n"))
		})
		if schedules() != before {
			t.Error("a refused schedule was stored")
		}
		// Labels forged on the schedule itself: its runs carry its own.
		forged := strings.Replace(schedule(f.own, "forge", "  suspend: true\n", "", job), "metadata: {",
			"metadata: {labels: {purser.io/schedule: nightly, purser.io/scheduled-time: 2020-01-01T00-00-00Z}, ", 1)
		f.yaml("mallory", "PUT", schedPath(f.own, "forge"), forged).want(t, http.StatusCreated)
		run := f.do("mallory", "POST", schedPath(f.own, "forge")+"/run", nil).want(t, http.StatusAccepted)
		labels, _ := run.body["metadata"].(map[string]any)["labels"].(map[string]any)
		if labels[v1alpha1.LabelSchedule] != "forge" || labels[v1alpha1.LabelScheduledTime] == "2020-01-01T00-00-00Z" {
			t.Errorf("a run carries the labels forged on its schedule: %v", labels)
		}
		f.do("mallory", "DELETE", "/api/v1/runnables/"+f.own+"/"+run.str("metadata", "name"), nil).want(t, http.StatusOK)
		f.do("mallory", "DELETE", schedPath(f.own, "forge"), nil).want(t, http.StatusOK)
	})

	// A schedule in the approval namespace: neither a tick nor a run by
	// hand skips approval, and its author may not approve its runs.
	t.Run("ScheduleSkipsApproval", func(t *testing.T) {
		f.yaml("mallory", "PUT", schedPath(f.approval, "appr"), schedule(f.approval, "appr", "", "", job)).want(t, http.StatusCreated)
		run := f.do("mallory", "POST", schedPath(f.approval, "appr")+"/run", nil).want(t, http.StatusAccepted)
		if run.str("status", "phase") != string(v1alpha1.PhasePendingApproval) {
			t.Fatalf("a run by hand in an approval namespace is not PendingApproval: %s", run.raw)
		}
		path := "/api/v1/runnables/" + f.approval + "/" + run.str("metadata", "name")
		f.refused("approving her own schedule's run", http.StatusForbidden, func() answer {
			rv := f.do("mallory", "GET", path, nil).str("metadata", "resourceVersion")
			return f.do("mallory", "POST", path+"/approve?resourceVersion="+rv, nil)
		})
		got := f.do("mallory", "GET", schedPath(f.approval, "appr"), nil).want(t, http.StatusOK)
		next, err := time.Parse(time.RFC3339, got.str("status", "nextScheduleTime"))
		if err != nil {
			t.Fatalf("no next tick: %s", got.raw)
		}
		clock := next.Add(time.Second)
		sched := scheduler.New(scheduler.Config{Store: f.store, Policy: func() *policy.Policy { return farmPolicy(t, f) }, Now: func() time.Time { return clock }})
		if err := sched.Fire(t.Context(), f.approval, "appr"); err != nil {
			t.Fatal(err)
		}
		r, err := f.runnableIn(f.approval, v1alpha1.TickRunName("appr", next))
		if err != nil {
			t.Fatalf("the tick created no runnable: %v", err)
		}
		if r.Phase != string(v1alpha1.PhasePendingApproval) {
			t.Fatalf("a tick in an approval namespace is %s, not PendingApproval", r.Phase)
		}
		f.do("mallory", "DELETE", schedPath(f.approval, "appr"), nil).want(t, http.StatusOK)
	})

	// Catch-up of every tick of a schedule firing each minute, after a
	// year without a scheduler: at most MaxCatchUpTicks runnables (and the
	// tick of now), the rest counted missed. In the approval namespace, so
	// that the runs wait for an approver rather than load the cluster.
	t.Run("CatchUpIsBounded", func(t *testing.T) {
		f.yaml("mallory", "PUT", schedPath(f.approval, "flood"), schedule(f.approval, "flood",
			"  schedule: \"* * * * *\"\n  catchUp: {policy: All}\n", "", job)).want(t, http.StatusCreated)
		clock := time.Now().AddDate(1, 0, 0).Truncate(time.Minute).Add(30 * time.Second)
		sched := scheduler.New(scheduler.Config{Store: f.store, Policy: func() *policy.Policy { return farmPolicy(t, f) }, Now: func() time.Time { return clock }})
		start := time.Now()
		if err := sched.Fire(t.Context(), f.approval, "flood"); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		var n int
		if err := f.raw.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM runnables WHERE namespace = $1 AND name LIKE 'flood-%'", f.approval).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 || n > v1alpha1.MaxCatchUpTicks+1 {
			t.Errorf("a year of ticks caught up as %d runnables, want 1 to %d", n, v1alpha1.MaxCatchUpTicks+1)
		}
		st := f.do("mallory", "GET", schedPath(f.approval, "flood"), nil).want(t, http.StatusOK)
		status, _ := st.body["status"].(map[string]any)
		if missed, _ := status["missed"].(float64); missed < 500000 {
			t.Errorf("the ticks not caught up are not counted missed: %v", status["missed"])
		}
		t.Logf("a year of ticks: %d runnables, %v missed, in %s", n, status["missed"], took)
		f.do("mallory", "DELETE", schedPath(f.approval, "flood"), nil).want(t, http.StatusOK)
	})

	// A runnable created by hand under the name of a schedule's next tick,
	// with another spec and the schedule's labels forged: the tick creates
	// nothing over it, and the pre-created runnable keeps its own spec.
	t.Run("TickNamePreCreated", func(t *testing.T) {
		f.yaml("mallory", "PUT", schedPath(f.approval, "squat"), schedule(f.approval, "squat", "", "", job)).want(t, http.StatusCreated)
		got := f.do("mallory", "GET", schedPath(f.approval, "squat"), nil).want(t, http.StatusOK)
		next, err := time.Parse(time.RFC3339, got.str("status", "nextScheduleTime"))
		if err != nil {
			t.Fatalf("no next tick: %s", got.raw)
		}
		name := v1alpha1.TickRunName("squat", next)
		forged := strings.Replace(runnable(f.approval, name, configMap("x", "squatted")), "metadata: {",
			"metadata: {labels: {purser.io/schedule: squat, purser.io/scheduled-time: "+v1alpha1.ScheduledTimeLabel(next)+"}, ", 1)
		f.yaml("mallory", "POST", "/api/v1/runnables", forged).want(t, http.StatusAccepted)
		clock := next.Add(time.Second)
		sched := scheduler.New(scheduler.Config{Store: f.store, Policy: func() *policy.Policy { return farmPolicy(t, f) }, Now: func() time.Time { return clock }})
		if err := sched.Fire(t.Context(), f.approval, "squat"); err != nil {
			t.Fatal(err)
		}
		r, err := f.runnableIn(f.approval, name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(r.Spec), "squatted") || r.Submitter != "mallory" {
			t.Errorf("the pre-created runnable was replaced by the tick: %s", r.Spec)
		}
		f.do("mallory", "DELETE", schedPath(f.approval, "squat"), nil).want(t, http.StatusOK)
	})

	// Kinds without a driver through tricks: the case of a kind, a
	// built-in kind's name in another group, a kind named like a List, a
	// List of privileged pods, and an undriven kind nested in an Argo
	// resource template (alone, and as a List's item).
	t.Run("UndrivenKindTricks", func(t *testing.T) {
		privPod := `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: busybox, securityContext: {privileged: true}}]}}`
		for i, c := range []struct{ what, tmpl, want string }{
			{"a Job written job", "apiVersion: batch/v1\nkind: job\nspec: {template: {spec: {hostPID: true, containers: [{name: c, image: busybox}]}}}\n", "no driver for kind job.batch"},
			{"a Job of another group", "apiVersion: example.com/v1\nkind: Job\nspec: {template: {spec: {containers: [{name: c, image: busybox}]}}}\n", "no driver for kind Job.example.com"},
			{"a Pod of another group", "apiVersion: evil.io/v1\nkind: Pod\nspec: {hostPID: true}\n", "no driver for kind Pod.evil.io"},
			{"a custom kind named like a List", "apiVersion: example.com/v1\nkind: GizmoList\nspec: {podTemplate: {spec: {hostPID: true}}}\n", "no driver for kind GizmoList.example.com"},
			{"a List of privileged Pods", "apiVersion: v1\nkind: List\nitems: [" + privPod + "]\n", "privileged"},
			{"a Gizmo in a workflow's resource manifest", resourceWorkflow(`apiVersion: example.com/v1
kind: Gizmo
metadata: {name: g}
spec: {podTemplate: {spec: {hostPID: true}}}
`), "no driver for kind Gizmo.example.com"},
			{"a Gizmo as the item of a List in a workflow's resource manifest", resourceWorkflow(`apiVersion: v1
kind: List
items:
- {apiVersion: example.com/v1, kind: Gizmo, metadata: {name: g}, spec: {podTemplate: {spec: {hostPID: true}}}}
`), "no driver for kind Gizmo.example.com"},
			{"a GizmoList without items in a workflow's resource manifest", resourceWorkflow(`apiVersion: example.com/v1
kind: GizmoList
metadata: {name: g}
spec: {podTemplate: {spec: {hostPID: true}}}
`), "no driver for kind GizmoList.example.com"},
			// kubectl (which runs Argo's resource templates) reads any
			// object with items as a list, whatever its kind, and creates
			// its items.
			{"privileged Pods as the items of a ConfigMap in a workflow's resource manifest", resourceWorkflow(`apiVersion: v1
kind: ConfigMap
metadata: {name: c}
items:
- ` + privPod + `
`), "privileged"},
			// apiVersions that read as one group here and another there.
			{"a Job of group Batch", "apiVersion: Batch/v1\nkind: Job\nspec: {template: {spec: {hostPID: true, containers: [{name: c, image: busybox}]}}}\n", "no driver for kind Job.Batch"},
			{"a Job of apiVersion batch/v1/x", "apiVersion: batch/v1/x\nkind: Job\nspec: {template: {spec: {hostPID: true, containers: [{name: c, image: busybox}]}}}\n", "must be version or group/version"},
			{"a Pod of apiVersion /v1", "apiVersion: /v1\nkind: Pod\nspec: {hostPID: true, containers: [{name: c, image: busybox}]}\n", "hostPID=true"},
			// A manifest whose keys come twice: kubectl keeps the last.
			{"a ConfigMap that is a Gizmo by its second kind, in a workflow's resource manifest", argoWorkflow("wf", `  templates:
  - name: main
    resource:
      action: create
      manifest: '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "kind": "Gizmo", "apiVersion": "example.com/v1"}'
`), "no driver for kind Gizmo.example.com"},
			{"a Pod made privileged by a second spec, in a workflow's resource manifest", argoWorkflow("wf", `  templates:
  - name: main
    resource:
      action: create
      manifest: '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}, "spec": {"containers": [{"name": "c", "image": "x", "securityContext": {"privileged": true}}]}}'
`), "privileged=true"},
			{"a Gizmo as the item of a ConfigMap in a workflow's resource manifest", resourceWorkflow(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "items": [{"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "g"}}]}
`), "no driver for kind Gizmo.example.com"},
		} {
			a := f.refused(c.what, http.StatusUnprocessableEntity, func() answer {
				return f.yaml("mallory", "POST", "/api/v1/runnables", runnable(f.own, "trick-"+fmt.Sprint(i), c.tmpl))
			})
			if !strings.Contains(string(a.raw), c.want) {
				t.Errorf("%s: the 422 does not say %q: %s", c.what, c.want, a.raw)
			}
		}
		// A RoleBinding, which her namespace denies, as a ConfigMap's
		// item: the kind rule sees it as it sees one alone.
		a := f.refused("a RoleBinding as a ConfigMap's item in a workflow's resource manifest", http.StatusForbidden, func() answer {
			return f.yaml("mallory", "POST", "/api/v1/runnables", runnable(f.own, "trick-rb", resourceWorkflow(`apiVersion: v1
kind: ConfigMap
metadata: {name: c}
items:
- {apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: rb}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}, subjects: [{kind: User, name: mallory, apiGroup: rbac.authorization.k8s.io}]}
`)))
		})
		if !strings.Contains(string(a.raw), "RoleBinding.rbac.authorization.k8s.io") {
			t.Errorf("the 403 does not name the kind: %s", a.raw)
		}
	})

	// /k8s: a request refused before its body is read (no valid token, a
	// write /k8s does not take) ends its connection, so that a trickled
	// body holds nothing, and writes nothing.
	t.Run("KubeRefusedCloses", func(t *testing.T) {
		for _, c := range []struct {
			what, token, path string
			code              int
		}{
			{"no valid token", "not-a-token", "/k8s/api/v1/namespaces/" + f.own + "/configmaps", http.StatusUnauthorized},
			// purser's kinds are written here (k8swrite_test.go): hers
			// in the victim's namespace is refused by the policy, a kind
			// not served is not found, each before the body is read.
			{"mallory's runnable in the victim's namespace", f.tokens["mallory"], "/k8s/apis/purser.io/v1alpha1/namespaces/" + f.victim + "/runnables", http.StatusForbidden},
			{"mallory's schedule in her namespace", f.tokens["mallory"], "/k8s/apis/purser.io/v1alpha1/namespaces/" + f.own + "/schedules", http.StatusNotFound},
			// Native objects are written in a namespace of the farm-wide
			// /k8s only (a placement policy makes them runnables); one
			// cluster's is read-only, and the victim's namespace is not
			// hers.
			{"mallory's ConfigMap through one cluster's /k8s", f.tokens["mallory"], "/k8s/clusters/dc1/api/v1/namespaces/" + f.own + "/configmaps", http.StatusMethodNotAllowed},
			{"mallory's ConfigMap in the victim's namespace", f.tokens["mallory"], "/k8s/api/v1/namespaces/" + f.victim + "/configmaps", http.StatusForbidden},
		} {
			req, err := http.NewRequestWithContext(t.Context(), "POST", f.url+c.path, strings.NewReader(strings.Repeat("x", 1<<20)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+c.token)
			req.Header.Set("Content-Type", "application/json")
			before := f.state()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != c.code || !resp.Close {
				t.Errorf("%s: %d, connection kept %v, want %d and closed", c.what, resp.StatusCode, !resp.Close, c.code)
			}
			if after := f.state(); after != before {
				t.Errorf("%s changed the database: %s -> %s", c.what, before, after)
			}
		}
		// A body that trickles: the answer comes at once and the server
		// ends the connection without waiting for the rest.
		u, err := url.Parse(f.url)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "POST /k8s/api/v1/namespaces/%s/configmaps HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer not-a-token\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{\"a\":", f.own, u.Host)
		start := time.Now()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer to a trickled refused request: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		var one [1]byte
		if _, err := conn.Read(one[:]); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("the connection of a trickled refused request stays open (%v)", err)
		}
		if resp.StatusCode != http.StatusUnauthorized || time.Since(start) > 5*time.Second {
			t.Errorf("a trickled refused request: %d after %s", resp.StatusCode, time.Since(start))
		}
	})
}

// runnableIn reads runnable ns/name from the database.
func (f *farm) runnableIn(ns, name string) (*store.Runnable, error) {
	var r *store.Runnable
	err := f.store.Read(f.t.Context(), func(tx *store.Tx) error {
		var err error
		r, err = tx.Runnables().Get(f.t.Context(), ns, name)
		return err
	})
	return r, err
}

// farmPolicy is the farm's policy for a scheduler a test runs itself:
// mallory editor of her namespace and of the approval namespace, which
// requires approval with carol (and mallory) its approvers.
func farmPolicy(t *testing.T, f *farm) *policy.Policy {
	p, err := policy.NewPolicy(policy.PolicyFile{
		Admins: []string{"admin"},
		PriorityClasses: map[string]policy.PriorityClass{
			"batch": {Value: 0}, "normal": {Value: 10}, "critical": {Value: 1000, Namespaces: []string{f.victim}},
		},
		Namespaces: map[string]policy.NamespacePolicy{
			f.own: {Roles: map[policy.Role][]string{policy.RoleEditor: {"mallory"}}},
			f.approval: {
				Roles:    map[policy.Role][]string{policy.RoleEditor: {"mallory"}, policy.RoleApprover: {"carol", "mallory"}},
				Approval: policy.Approval{Runnables: true, Deployables: true},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// resourceWorkflow is a Workflow whose one template is a resource template
// creating manifest, as Argo hands it to kubectl.
func resourceWorkflow(manifest string) string {
	return argoWorkflow("wf", "  templates:\n  - name: main\n    resource:\n      action: create\n      manifest: |\n"+
		strings.TrimRight(indentBy(manifest, "        "), " "))
}
