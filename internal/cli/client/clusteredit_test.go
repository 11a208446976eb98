package client

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestLabelEdit(t *testing.T) {
	base := map[string]string{"dc": "dc-1", "tier": "dev"}
	for _, tc := range []struct {
		args      []string
		overwrite bool
		want      string // labels after, or the error
		changed   bool
	}{
		{[]string{"team=a"}, false, "dc=dc-1,team=a,tier=dev", true},
		{[]string{"tier=prod"}, false, `error: label tier is already "dev"; add --overwrite`, false},
		{[]string{"tier=prod"}, true, "dc=dc-1,tier=prod", true},
		{[]string{"tier=dev"}, false, "dc=dc-1,tier=dev", false},
		{[]string{"tier-", "x=y"}, false, "dc=dc-1,x=y", true},
		{[]string{"nope-"}, false, "error: there is no label nope to remove", false},
		{[]string{"bad key=v"}, false, `parse: invalid label key "bad key"`, false},
		{[]string{"k=v", "k=w"}, false, "parse: label k is given twice", false},
		{[]string{"k"}, false, `parse: "k" is neither key=value`, false},
		{nil, false, "parse: say which labels", false},
	} {
		e, err := ParseLabelEdit(tc.args, tc.overwrite)
		got, changed := "", false
		if err != nil {
			got = "parse: " + err.Error()
		} else if out, ch, err := e.Apply(base); err != nil {
			got = "error: " + err.Error()
		} else {
			got, changed = joinMap(out), ch
		}
		if !strings.HasPrefix(got, tc.want) || changed != tc.changed {
			t.Errorf("label %v (overwrite %v) = %q, changed %v; want %q, %v", tc.args, tc.overwrite, got, changed, tc.want, tc.changed)
		}
	}
}

func TestTaintEdit(t *testing.T) {
	base := []corev1.Taint{{Key: "gpu", Value: "a100", Effect: corev1.TaintEffectNoSchedule}, {Key: "gpu", Effect: corev1.TaintEffectNoExecute}}
	for _, tc := range []struct {
		args      []string
		overwrite bool
		want      string
		changed   bool
	}{
		{[]string{"maintenance=yes:NoSchedule"}, false, "gpu=a100:NoSchedule,gpu:NoExecute,maintenance=yes:NoSchedule", true},
		{[]string{"maint:PreferNoSchedule"}, false, "gpu=a100:NoSchedule,gpu:NoExecute,maint:PreferNoSchedule", true},
		{[]string{"gpu=a100:NoSchedule"}, false, "gpu=a100:NoSchedule,gpu:NoExecute", false},
		{[]string{"gpu=h100:NoSchedule"}, false, `error: taint gpu:NoSchedule is already set with value "a100"`, false},
		{[]string{"gpu=h100:NoSchedule"}, true, "gpu=h100:NoSchedule,gpu:NoExecute", true},
		{[]string{"gpu:NoExecute-"}, false, "gpu=a100:NoSchedule", true},
		{[]string{"gpu-"}, false, "", true},
		{[]string{"other-"}, false, "error: there is no taint other to remove", false},
		{[]string{"k=v"}, false, `parse: taint "k=v" has no effect`, false},
		{[]string{"k"}, false, `parse: taint "k" has no effect`, false},
		{[]string{"k=v:Sometimes"}, false, "parse: invalid taint", false},
		{[]string{"a:NoSchedule", "a=b:NoSchedule"}, false, "parse: taint a:NoSchedule is given twice", false},
	} {
		e, err := ParseTaintEdit(tc.args, tc.overwrite)
		got, changed := "", false
		if err != nil {
			got = "parse: " + err.Error()
		} else if out, ch, err := e.Apply(base); err != nil {
			got = "error: " + err.Error()
		} else {
			got, changed = joinTaints(out), ch
		}
		if !strings.HasPrefix(got, tc.want) || (tc.want == "" && got != "") || changed != tc.changed {
			t.Errorf("taint %v (overwrite %v) = %q, changed %v; want %q, %v", tc.args, tc.overwrite, got, changed, tc.want, tc.changed)
		}
	}
}

func TestCordon(t *testing.T) {
	other := corev1.Taint{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}
	cordon := corev1.Taint{Key: "purser.io/cordon", Effect: corev1.TaintEffectNoSchedule}
	drain := corev1.Taint{Key: "purser.io/cordon", Effect: corev1.TaintEffectNoExecute}
	for _, tc := range []struct {
		name    string
		in      []corev1.Taint
		effect  corev1.TaintEffect
		want    string
		changed bool
	}{
		{"cordon", []corev1.Taint{other}, corev1.TaintEffectNoSchedule, "gpu:NoSchedule,purser.io/cordon:NoSchedule", true},
		{"cordon again", []corev1.Taint{cordon, other}, corev1.TaintEffectNoSchedule, "purser.io/cordon:NoSchedule,gpu:NoSchedule", false},
		{"drain a cordoned cluster", []corev1.Taint{cordon, other}, corev1.TaintEffectNoExecute, "gpu:NoSchedule,purser.io/cordon:NoExecute", true},
		{"uncordon a drained cluster", []corev1.Taint{drain, other}, "", "gpu:NoSchedule", true},
		{"uncordon", []corev1.Taint{other}, "", "gpu:NoSchedule", false},
	} {
		out, changed := Cordon(tc.in, tc.effect)
		if got := joinTaints(out); got != tc.want || changed != tc.changed {
			t.Errorf("%s: %q, changed %v; want %q, %v", tc.name, got, changed, tc.want, tc.changed)
		}
	}
}

func joinMap(m map[string]string) string {
	var parts []string
	for _, k := range []string{"dc", "team", "tier", "x"} {
		if v, ok := m[k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ",")
}

func joinTaints(ts []corev1.Taint) string {
	var parts []string
	for _, t := range ts {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		parts = append(parts, fmt.Sprintf("%s:%s", s, t.Effect))
	}
	return strings.Join(parts, ",")
}
