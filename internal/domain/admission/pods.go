// Package admission decides what a tenant's object may make a member
// cluster run, beyond its kind and scope: the pods it describes, judged by
// the Kubernetes Pod Security Standards with the kube-apiserver's own
// library (k8s.io/pod-security-admission), and the service accounts no
// tenant's pod may name. The API refuses an object that fails here (422,
// with the library's reasons), and the submitter and the syncer ask again
// right before they act, so a policy tightened since the object was
// accepted holds too.
//
// What pods and nested objects a kind makes is the kind's driver's to say
// (internal/domain/kinds); admission judges what the drivers return and reads no
// kind's fields itself.
package admission

import (
	"github.com/purser-io/purser/internal/domain/kinds"
)

// PodTemplate is one pod an object describes (see kinds.PodTemplate).
type PodTemplate = kinds.PodTemplate

// PodTemplates finds every pod template of obj, as its kind's driver
// says the cluster will run them (kinds.Registry.PodTemplates).
func PodTemplates(obj map[string]any) ([]PodTemplate, error) {
	return kinds.Default().PodTemplates(obj)
}
