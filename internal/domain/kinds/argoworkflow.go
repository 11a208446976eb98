package kinds

import "errors"

// argoWorkflowDriver is the Workflow's: what an Argo Workflow adds to the
// other kinds that keep a WorkflowSpec is that it runs, so it suspends,
// takes (or rather does not take) changes, and asks for resources.
type argoWorkflowDriver struct{ argoDriver }

// Demand is the pod of every template that runs one (as PodTemplates
// builds it: templateDefaults merged, podSpecPatch applied), one at a
// time: placement needs the largest, since steps that run in parallel
// are not added up (spec.resources declares that). Resource and data
// templates run only the executor's pod, and the executor's own
// containers, sized by the workflow controller's configuration, are not
// counted.
func (d argoWorkflowDriver) Demand(obj map[string]any) (Demand, error) {
	pods, err := d.PodTemplates(obj)
	if err != nil {
		return Demand{}, err
	}
	out := Demand{OneAtATime: true}
	for _, p := range pods {
		if len(p.Spec.Containers) == 0 {
			continue // a resource or data template: the executor's pod
		}
		out.Groups = append(out.Groups, PodGroup{What: "pod (largest step, " + p.Path + ")", Count: 1, Spec: p.Spec})
	}
	return out, nil
}

func (argoWorkflowDriver) DemandBy() string {
	return "the largest template's pod, one step at a time"
}

// SuspendSpec sets spec.suspend, as `argo suspend` and `argo resume` set
// and clear it (Argo Workflows' SuspendWorkflow and ResumeWorkflow); the
// controller schedules no new step while it is true.
func (argoWorkflowDriver) SuspendSpec(_ map[string]any, suspend bool) (map[string]any, error) {
	return map[string]any{"suspend": suspend}, nil
}

func (argoWorkflowDriver) SuspendsBy() string { return "spec.suspend" }

// InPlace: no. The workflow controller executes the spec it stored at its
// first reconcile (status.storedWorkflowTemplateSpec, by its
// setExecWorkflow and setStoredWfSpec) and takes from later changes only
// spec.suspend, spec.shutdown and the entrypoint
// (needsStoredWfSpecUpdate): a changed step would be stored and never
// run.
func (argoWorkflowDriver) InPlace(_, _ map[string]any) error {
	return errors.New("an Argo Workflow runs the spec its controller stored when it started " +
		"(status.storedWorkflowTemplateSpec) and takes only spec.suspend and spec.shutdown from later changes: " +
		"the change would never run")
}

func (argoWorkflowDriver) UpgradeMode(map[string]any) string { return "" }

func (argoWorkflowDriver) InPlaceBy() string {
	return "no: the controller runs the spec it stored at the start"
}
