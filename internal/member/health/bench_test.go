package health

import "testing"

// BenchmarkInterpret measures one verdict, which the ingester computes for
// every event it stores: a built-in and a CEL rule over the same shape.
func BenchmarkInterpret(b *testing.B) {
	in, err := New([]Rule{widgetRule})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, obj string }{
		{"Deployment", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, generation: 2}\nspec: {replicas: 3}\nstatus:\n  observedGeneration: 2\n  replicas: 3\n  updatedReplicas: 3\n  availableReplicas: 3\n  conditions:\n  - {type: Available, status: \"True\"}\n  - {type: Progressing, status: \"True\", reason: NewReplicaSetAvailable}"},
		{"FlinkDeployment", flinkDeployment("  jobStatus: {state: RECONCILING}\n  error: '" + errImagePull + "'\n")},
		{"CELRule", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: gizmo}\nstatus: {ready: true, message: all good}"},
	} {
		obj := decode(b, bc.obj)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				in.Interpret(obj)
			}
		})
	}
}
