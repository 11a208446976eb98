package v1alpha1

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var testNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func validRunnable() *Runnable {
	deadline := testNow.Add(24 * time.Hour)
	return &Runnable{
		TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindRunnable},
		Metadata: ObjectMeta{Name: "nightly-report", Namespace: "team-a", Labels: map[string]string{"team": "a"}},
		Spec: RunnableSpec{
			Template: map[string]any{
				"apiVersion": "batch/v1",
				"kind":       "Job",
				"metadata":   map[string]any{"name": "nightly-report", "namespace": "team-a"},
				"spec":       map[string]any{"parallelism": int64(1)},
			},
			Placement: Placement{
				ClusterAffinity: &ClusterAffinity{
					ClusterNames:  []string{"dc1-a", "dc2-a"},
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}},
					Exclude:       []string{"dc3-a"},
				},
				ClusterTolerations: []corev1.Toleration{
					{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
					{Key: "unreachable", Operator: corev1.TolerationOpEqual, Value: "yes", Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(60))},
				},
			},
			Deadline: &deadline,
			Failover: &Failover{
				Application: &ApplicationFailover{
					TolerationSeconds:  new(int64(120)),
					PurgeMode:          PurgeGracefully,
					GracePeriodSeconds: new(int64(600)),
					StatePreservation: &StatePreservation{Rules: []StatePreservationRule{
						{AliasLabelName: "flink.apache.org/job-id", JSONPath: "{.jobStatus.jobId}"},
					}},
				},
				Cluster:     &ClusterFailover{PurgeMode: PurgeDirectly},
				Consistency: ConsistencyAtMostOne,
				Mutations: []Mutation{{
					When:  "'flink.apache.org/job-id' in preserved",
					Path:  "spec.job.initialSavepointPath",
					Value: "'s3://checkpoints/' + preserved['flink.apache.org/job-id']",
				}},
			},
		},
	}
}

func validDeployable() *Deployable {
	return &Deployable{
		TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindDeployable},
		Metadata: ObjectMeta{Name: "app-config", Namespace: "team-a"},
		Spec: DeployableSpec{
			Template: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": "v"}},
			Placement: Placement{ClusterAffinity: &ClusterAffinity{
				LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod", "staging"}},
				}},
			}},
		},
	}
}

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: dc1-a
  cluster: {server: "https://127.0.0.1:6443"}
contexts:
- name: admin@dc1-a
  context: {cluster: dc1-a, user: admin}
users:
- name: admin
  user: {token: secret}
current-context: admin@dc1-a
`

func validCluster() *Cluster {
	return &Cluster{
		TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindCluster},
		Metadata: ObjectMeta{Name: "dc1-a", Labels: map[string]string{"region": "us-east", "dc": "dc1"}},
		Spec: ClusterSpec{
			Kubeconfig: testKubeconfig,
			Taints:     []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}},
		},
	}
}

// checkOneError asserts that errs holds exactly one problem, on wantField,
// or none when wantField is empty.
func checkOneError(t *testing.T, errs FieldErrors, wantField string) {
	t.Helper()
	if wantField == "" {
		if len(errs) != 0 {
			t.Fatalf("want no errors, got %s", errs)
		}
		return
	}
	if len(errs) != 1 || errs[0].Field != wantField {
		t.Fatalf("want one error on %s, got %d: %s", wantField, len(errs), errs)
	}
	if errs[0].Message == "" {
		t.Fatal("error has no message")
	}
}

func TestValidateRunnable(t *testing.T) {
	cases := []struct {
		name      string
		mutate    func(r *Runnable)
		wantField string
	}{
		{"valid", func(*Runnable) {}, ""},
		{"valid without failover or placement", func(r *Runnable) { r.Spec.Failover = nil; r.Spec.Placement = Placement{}; r.Spec.Deadline = nil }, ""},
		{"valid with generateName", func(r *Runnable) { r.Metadata.Name = ""; r.Metadata.GenerateName = "report-" }, ""},
		{"valid with template metadata unset", func(r *Runnable) { delete(r.Spec.Template, "metadata") }, ""},
		{"valid before defaults", func(r *Runnable) { r.Spec.Failover.Consistency = ""; r.Spec.Failover.Cluster.PurgeMode = "" }, ""},
		{"apiVersion", func(r *Runnable) { r.APIVersion = "purser.io/v1" }, "apiVersion"},
		{"kind", func(r *Runnable) { r.Kind = KindCluster }, "kind"},
		{"name characters", func(r *Runnable) { r.Metadata.Name = "Nightly_Report" }, "metadata.name"},
		{"name length", func(r *Runnable) { r.Metadata.Name = strings.Repeat("a", 254) }, "metadata.name"},
		{"no name nor generateName", func(r *Runnable) { r.Metadata.Name = "" }, "metadata.name"},
		{"generateName characters", func(r *Runnable) { r.Metadata.Name = ""; r.Metadata.GenerateName = "-report" }, "metadata.generateName"},
		{"generateName too long for the suffix", func(r *Runnable) {
			r.Metadata.Name = ""
			r.Metadata.GenerateName = strings.Repeat("a", 249)
		}, "metadata.generateName"},
		{"namespace missing", func(r *Runnable) { r.Metadata.Namespace = "" }, "metadata.namespace"},
		{"namespace with a dot", func(r *Runnable) { r.Metadata.Namespace = "team.a" }, "metadata.namespace"},
		{"label key", func(r *Runnable) { r.Metadata.Labels = map[string]string{"a/b/c": "x"} }, "metadata.labels"},
		{"label value", func(r *Runnable) { r.Metadata.Labels["team"] = "-a" }, "metadata.labels[team]"},
		{"annotation key", func(r *Runnable) { r.Metadata.Annotations = map[string]string{"no spaces": "x"} }, "metadata.annotations"},
		{"annotations size", func(r *Runnable) {
			r.Metadata.Annotations = map[string]string{"big": strings.Repeat("x", maxAnnotationsBytes)}
		}, "metadata.annotations"},
		{"template missing", func(r *Runnable) { r.Spec.Template = nil }, "spec.template"},
		{"template apiVersion missing", func(r *Runnable) { delete(r.Spec.Template, "apiVersion") }, "spec.template.apiVersion"},
		{"template apiVersion malformed", func(r *Runnable) { r.Spec.Template["apiVersion"] = "a/b/c" }, "spec.template.apiVersion"},
		{"template kind missing", func(r *Runnable) { r.Spec.Template["kind"] = "" }, "spec.template.kind"},
		{"template kind not a string", func(r *Runnable) { r.Spec.Template["kind"] = int64(3) }, "spec.template.kind"},
		{"template metadata not an object", func(r *Runnable) { r.Spec.Template["metadata"] = "x" }, "spec.template.metadata"},
		{"valid with empty template name and namespace", func(r *Runnable) {
			r.Spec.Template["metadata"] = map[string]any{"name": "", "namespace": nil}
		}, ""},
		{"template name not a string", func(r *Runnable) {
			r.Spec.Template["metadata"] = map[string]any{"name": int64(5)}
		}, "spec.template.metadata.name"},
		{"template name", func(r *Runnable) {
			r.Spec.Template["metadata"] = map[string]any{"name": "Bad Name"}
		}, "spec.template.metadata.name"},
		{"template namespace elsewhere", func(r *Runnable) {
			r.Spec.Template["metadata"] = map[string]any{"namespace": "team-b"}
		}, "spec.template.metadata.namespace"},
		{"clusterNames", func(r *Runnable) { r.Spec.Placement.ClusterAffinity.ClusterNames = []string{"dc1.a"} }, "spec.placement.clusterAffinity.clusterNames[0]"},
		{"exclude", func(r *Runnable) { r.Spec.Placement.ClusterAffinity.Exclude = []string{"ok", "DC3"} }, "spec.placement.clusterAffinity.exclude[1]"},
		{"labelSelector operator", func(r *Runnable) {
			r.Spec.Placement.ClusterAffinity.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}
		}, "spec.placement.clusterAffinity.labelSelector"},
		{"labelSelector value", func(r *Runnable) {
			r.Spec.Placement.ClusterAffinity.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "not valid"}}
		}, "spec.placement.clusterAffinity.labelSelector"},
		{"toleration operator", func(r *Runnable) { r.Spec.Placement.ClusterTolerations[0].Operator = "Gt" }, "spec.placement.clusterTolerations[0].operator"},
		{"toleration effect", func(r *Runnable) { r.Spec.Placement.ClusterTolerations[0].Effect = "NoRun" }, "spec.placement.clusterTolerations[0].effect"},
		{"toleration value with Exists", func(r *Runnable) { r.Spec.Placement.ClusterTolerations[0].Value = "x" }, "spec.placement.clusterTolerations[0].value"},
		{"toleration key with Equal", func(r *Runnable) { r.Spec.Placement.ClusterTolerations[1].Key = "" }, "spec.placement.clusterTolerations[1].key"},
		{"toleration key format", func(r *Runnable) { r.Spec.Placement.ClusterTolerations[0].Key = "a b" }, "spec.placement.clusterTolerations[0].key"},
		{"toleration seconds without NoExecute", func(r *Runnable) {
			r.Spec.Placement.ClusterTolerations[1].Effect = corev1.TaintEffectNoSchedule
		}, "spec.placement.clusterTolerations[1].tolerationSeconds"},
		{"deadline passed", func(r *Runnable) { r.Spec.Deadline = new(testNow.Add(-time.Second)) }, "spec.deadline"},
		{"deadline now", func(r *Runnable) { r.Spec.Deadline = new(testNow) }, "spec.deadline"},
		{"consistency", func(r *Runnable) { r.Spec.Failover.Consistency = "ExactlyOne" }, "spec.failover.consistency"},
		{"application purgeMode", func(r *Runnable) { r.Spec.Failover.Application.PurgeMode = "Immediately" }, "spec.failover.application.purgeMode"},
		{"cluster purgeMode Never", func(r *Runnable) { r.Spec.Failover.Cluster.PurgeMode = PurgeNever }, "spec.failover.cluster.purgeMode"},
		{"tolerationSeconds negative", func(r *Runnable) { r.Spec.Failover.Application.TolerationSeconds = new(int64(-1)) }, "spec.failover.application.tolerationSeconds"},
		{"initialTolerationSeconds negative", func(r *Runnable) { r.Spec.Failover.Application.InitialTolerationSeconds = new(int64(-5)) }, "spec.failover.application.initialTolerationSeconds"},
		{"gracePeriodSeconds negative", func(r *Runnable) { r.Spec.Failover.Application.GracePeriodSeconds = new(int64(-1)) }, "spec.failover.application.gracePeriodSeconds"},
		{"aliasLabelName missing", func(r *Runnable) { rules(r)[0].AliasLabelName = "" }, "spec.failover.application.statePreservation.rules[0].aliasLabelName"},
		{"aliasLabelName format", func(r *Runnable) { rules(r)[0].AliasLabelName = "job id" }, "spec.failover.application.statePreservation.rules[0].aliasLabelName"},
		{"aliasLabelName repeated", func(r *Runnable) {
			sp := r.Spec.Failover.Application.StatePreservation
			sp.Rules = append(sp.Rules, sp.Rules[0])
		}, "spec.failover.application.statePreservation.rules[1].aliasLabelName"},
		{"jsonPath missing", func(r *Runnable) { rules(r)[0].JSONPath = "" }, "spec.failover.application.statePreservation.rules[0].jsonPath"},
		{"jsonPath unparsable", func(r *Runnable) { rules(r)[0].JSONPath = "{.jobStatus[" }, "spec.failover.application.statePreservation.rules[0].jsonPath"},
		{"jsonPath without braces", func(r *Runnable) { rules(r)[0].JSONPath = ".jobStatus.jobId" }, "spec.failover.application.statePreservation.rules[0].jsonPath"},
		{"when missing", func(r *Runnable) { r.Spec.Failover.Mutations[0].When = "" }, "spec.failover.mutations[0].when"},
		{"when not CEL", func(r *Runnable) { r.Spec.Failover.Mutations[0].When = "'a' in" }, "spec.failover.mutations[0].when"},
		{"when not a bool", func(r *Runnable) { r.Spec.Failover.Mutations[0].When = "preserved['a']" }, "spec.failover.mutations[0].when"},
		{"when with an unknown variable", func(r *Runnable) { r.Spec.Failover.Mutations[0].When = "attempt > 1" }, "spec.failover.mutations[0].when"},
		{"path missing", func(r *Runnable) { r.Spec.Failover.Mutations[0].Path = "" }, "spec.failover.mutations[0].path"},
		{"path with an empty key", func(r *Runnable) { r.Spec.Failover.Mutations[0].Path = "spec..x" }, "spec.failover.mutations[0].path"},
		{"path with spaces", func(r *Runnable) { r.Spec.Failover.Mutations[0].Path = "spec.a b" }, "spec.failover.mutations[0].path"},
		{"path to the identity", func(r *Runnable) { r.Spec.Failover.Mutations[0].Path = "metadata.name" }, "spec.failover.mutations[0].path"},
		{"value missing", func(r *Runnable) { r.Spec.Failover.Mutations[0].Value = "" }, "spec.failover.mutations[0].value"},
		{"value not CEL", func(r *Runnable) { r.Spec.Failover.Mutations[0].Value = "'s3://' +" }, "spec.failover.mutations[0].value"},
		{"value too long", func(r *Runnable) {
			r.Spec.Failover.Mutations[0].Value = "'" + strings.Repeat("x", maxExpressionLength) + "'"
		}, "spec.failover.mutations[0].value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := validRunnable()
			tc.mutate(r)
			checkOneError(t, ValidateRunnable(r, testNow), tc.wantField)
		})
	}
}

func rules(r *Runnable) []StatePreservationRule {
	return r.Spec.Failover.Application.StatePreservation.Rules
}

func TestValidateRunnableReportsEveryProblem(t *testing.T) {
	r := validRunnable()
	r.Metadata.Namespace = ""
	r.Spec.Template["kind"] = ""
	r.Spec.Failover.Mutations[0].When = "1 +"
	errs := ValidateRunnable(r, testNow)
	if len(errs) != 3 {
		t.Fatalf("want 3 errors, got %s", errs)
	}
}

func TestValidateDeployable(t *testing.T) {
	secret := func(d *Deployable) {
		d.Spec.Template = map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"data":       map[string]any{"password": "c2VjcmV0"},
			"stringData": map[string]any{"user": "admin"},
		}
	}
	cases := []struct {
		name      string
		mutate    func(d *Deployable)
		wantField string
	}{
		{"valid", func(*Deployable) {}, ""},
		{"valid secret", secret, ""},
		{"kind", func(d *Deployable) { d.Kind = KindRunnable }, "kind"},
		{"name required", func(d *Deployable) { d.Metadata.Name = "" }, "metadata.name"},
		{"generateName refused", func(d *Deployable) { d.Metadata.GenerateName = "app-" }, "metadata.generateName"},
		{"namespace required", func(d *Deployable) { d.Metadata.Namespace = "" }, "metadata.namespace"},
		{"template missing", func(d *Deployable) { d.Spec.Template = map[string]any{} }, "spec.template"},
		{"template generateName", func(d *Deployable) {
			d.Spec.Template["metadata"] = map[string]any{"generateName": "cfg-"}
		}, "spec.template.metadata.generateName"},
		{"secret data not base64", func(d *Deployable) {
			secret(d)
			d.Spec.Template["data"].(map[string]any)["password"] = "plain text!"
		}, "spec.template.data[password]"},
		{"secret data not a string", func(d *Deployable) {
			secret(d)
			d.Spec.Template["data"].(map[string]any)["password"] = int64(5)
		}, "spec.template.data[password]"},
		{"secret data not an object", func(d *Deployable) { secret(d); d.Spec.Template["data"] = "c2VjcmV0" }, "spec.template.data"},
		{"secret stringData not a string", func(d *Deployable) {
			secret(d)
			d.Spec.Template["stringData"].(map[string]any)["user"] = true
		}, "spec.template.stringData[user]"},
		{"labelSelector", func(d *Deployable) {
			d.Spec.Placement.ClusterAffinity.LabelSelector.MatchExpressions[0].Values = nil
		}, "spec.placement.clusterAffinity.labelSelector"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := validDeployable()
			tc.mutate(d)
			checkOneError(t, ValidateDeployable(d), tc.wantField)
		})
	}
}

func TestValidateCluster(t *testing.T) {
	cases := []struct {
		name      string
		mutate    func(c *Cluster)
		wantField string
	}{
		{"valid", func(*Cluster) {}, ""},
		{"apiVersion", func(c *Cluster) { c.APIVersion = "" }, "apiVersion"},
		{"name is a DNS label", func(c *Cluster) { c.Metadata.Name = "dc1.a" }, "metadata.name"},
		{"generateName refused", func(c *Cluster) { c.Metadata.GenerateName = "dc-" }, "metadata.generateName"},
		{"namespace refused", func(c *Cluster) { c.Metadata.Namespace = "default" }, "metadata.namespace"},
		{"label value", func(c *Cluster) { c.Metadata.Labels["dc"] = "dc 1" }, "metadata.labels[dc]"},
		{"kubeconfig required", func(c *Cluster) { c.Spec.Kubeconfig = "" }, "spec.kubeconfig"},
		{"inventory kinds", func(c *Cluster) { c.Spec.Inventory = &ClusterInventory{Kinds: []string{"Pod", "Event"}} }, ""},
		{"inventory kind unknown", func(c *Cluster) { c.Spec.Inventory = &ClusterInventory{Kinds: []string{"Pod", "pods"}} }, "spec.inventory.kinds[1]"},
		{"inventory kind twice", func(c *Cluster) { c.Spec.Inventory = &ClusterInventory{Kinds: []string{"Event", "Event"}} }, "spec.inventory.kinds[1]"},
		{"kubeconfig unreadable", func(c *Cluster) { c.Spec.Kubeconfig = "clusters: 5\n" }, "spec.kubeconfig"},
		{"kubeconfig without current-context", func(c *Cluster) {
			c.Spec.Kubeconfig = strings.Replace(testKubeconfig, "current-context: admin@dc1-a", "", 1)
		}, "spec.kubeconfig"},
		{"kubeconfig current-context missing", func(c *Cluster) {
			c.Spec.Kubeconfig = strings.Replace(testKubeconfig, "current-context: admin@dc1-a", "current-context: other", 1)
		}, "spec.kubeconfig"},
		{"kubeconfig cluster missing", func(c *Cluster) {
			c.Spec.Kubeconfig = strings.Replace(testKubeconfig, "{cluster: dc1-a,", "{cluster: dc9,", 1)
		}, "spec.kubeconfig"},
		{"kubeconfig without server", func(c *Cluster) {
			c.Spec.Kubeconfig = strings.Replace(testKubeconfig, `server: "https://127.0.0.1:6443"`, `server: ""`, 1)
		}, "spec.kubeconfig"},
		{"taint key required", func(c *Cluster) { c.Spec.Taints[0].Key = "" }, "spec.taints[0].key"},
		{"taint key format", func(c *Cluster) { c.Spec.Taints[0].Key = "a/b/c" }, "spec.taints[0].key"},
		{"taint value", func(c *Cluster) { c.Spec.Taints[0].Value = "two words" }, "spec.taints[0].value"},
		{"taint effect required", func(c *Cluster) { c.Spec.Taints[0].Effect = "" }, "spec.taints[0].effect"},
		{"taint effect", func(c *Cluster) { c.Spec.Taints[0].Effect = "NoRun" }, "spec.taints[0].effect"},
		{"taint repeated", func(c *Cluster) { c.Spec.Taints = append(c.Spec.Taints, c.Spec.Taints[0]) }, "spec.taints[1]"},
		{"same key, other effect", func(c *Cluster) {
			c.Spec.Taints = append(c.Spec.Taints, corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute})
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validCluster()
			tc.mutate(c)
			checkOneError(t, ValidateCluster(c), tc.wantField)
		})
	}
}

func TestValidateClusterUpdate(t *testing.T) {
	old := validCluster()

	keep := validCluster()
	keep.Spec.Kubeconfig = ""
	checkOneError(t, ValidateClusterUpdate(old, keep), "")

	renamed := validCluster()
	renamed.Metadata.Name = "dc2-a"
	checkOneError(t, ValidateClusterUpdate(old, renamed), "metadata.name")

	broken := validCluster()
	broken.Spec.Kubeconfig = "not: [a kubeconfig"
	checkOneError(t, ValidateClusterUpdate(old, broken), "spec.kubeconfig")
}

func TestMutationEnvEvaluates(t *testing.T) {
	env, err := NewMutationEnv()
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile("'s3://checkpoints/' + preserved['flink.apache.org/job-id']")
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := prg.Eval(map[string]any{MutationVariable: map[string]string{"flink.apache.org/job-id": "44cc"}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Value() != "s3://checkpoints/44cc" {
		t.Errorf("got %v", out.Value())
	}
}
