package main

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/purser-io/purser/api/v1alpha1"
	"github.com/purser-io/purser/internal/cli/client"
	"github.com/purser-io/purser/internal/cli/manifest"
)

// diffRunnable prints what apply would change of the Runnable o: a unified
// diff of its stored spec, labels and annotations against the file's, the
// file's defaults filled in as the API fills them; "new" when it does not
// exist, "unchanged" when nothing differs. It only reads.
func diffRunnable(cmd *cobra.Command, c *client.Client, o *manifest.Object, namespace string, nsGiven bool) error {
	body, ctype, err := inNamespace(o, namespace, nsGiven)
	if err != nil {
		return fmt.Errorf("%s: %w", o.Where(), err)
	}
	want, err := v1alpha1.DecodeRunnable(body, ctype)
	if err != nil {
		return fmt.Errorf("%s: %w", o.Where(), err)
	}
	want.SetDefaults()
	ns, name := want.Metadata.Namespace, want.Metadata.Name
	if ns == "" {
		ns = "default"
	}
	ref := "runnable/" + ns + "/" + name
	var have v1alpha1.Runnable
	res, _ := client.ResourceOfKind(v1alpha1.KindRunnable)
	_, err = c.Do(cmd.Context(), http.MethodGet, res.Path(ns, name), nil, nil, "", &have)
	if client.IsNotFound(err) {
		fmt.Fprintf(stdout(cmd), "%s: new; apply submits it\n", ref)
		return nil
	}
	if err != nil {
		return named(c, err)
	}
	if want.Spec.TTLSecondsAfterFinished == nil {
		want.Spec.TTLSecondsAfterFinished = have.Spec.TTLSecondsAfterFinished // as the update keeps it
	}
	a, err := diffView(have.Metadata, have.Spec)
	if err != nil {
		return err
	}
	b, err := diffView(want.Metadata, want.Spec)
	if err != nil {
		return err
	}
	if a == b {
		fmt.Fprintf(stdout(cmd), "%s: unchanged\n", ref)
		return nil
	}
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(a), B: difflib.SplitLines(b),
		FromFile: ref + " (stored, resourceVersion " + have.Metadata.ResourceVersion + ")", ToFile: ref + " (" + o.Where() + ")", Context: 3,
	})
	if err != nil {
		return err
	}
	fmt.Fprint(stdout(cmd), text)
	return nil
}

// diffView is what diff compares of a runnable: what a PUT changes.
func diffView(md v1alpha1.ObjectMeta, spec v1alpha1.RunnableSpec) (string, error) {
	view := map[string]any{"spec": spec}
	if len(md.Labels) > 0 || len(md.Annotations) > 0 {
		view["metadata"] = map[string]any{"labels": md.Labels, "annotations": md.Annotations}
	}
	data, err := json.Marshal(view)
	if err != nil {
		return "", err
	}
	out, err := yaml.JSONToYAML(data)
	return string(out), err
}
