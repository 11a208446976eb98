package store

import (
	"strings"
)

// System objects are those a Kubernetes cluster makes by itself, in every
// cluster, whatever its users do. They are tracked like any other record,
// but inventory lists leave them out unless asked (InventoryFilter.System,
// the API's ?system=true), because in a farm of clusters they outnumber
// the objects anyone put there: one kube-root-ca.crt per namespace per
// cluster. The rule, all of it:
//
//   - every object in the namespaces the kube-apiserver creates for itself
//     at start: kube-system, kube-public and kube-node-lease (kubernetes
//     pkg/controlplane/controller/systemnamespaces);
//   - in every other namespace, the ConfigMap kube-root-ca.crt, which
//     kube-controller-manager's root-ca-cert-publisher writes into each
//     (pkg/controller/certificates/rootcacertpublisher,
//     RootCACertConfigMapName), and the ServiceAccount default, which its
//     serviceaccount controller creates in each;
//   - except an object carrying purser's labels (purser.io/runnable-uid
//     or purser.io/deployable): purser put it there, so it is never a
//     system object, wherever it lives.
//
// Nodes are not system objects: they are the cluster's capacity, which
// every reader of the inventory wants to see.
var (
	SystemNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}
	SystemObjects    = []struct{ Kind, Name string }{
		{"ConfigMap", "kube-root-ca.crt"},
		{"ServiceAccount", "default"},
	}
	purserLabels = []string{"purser.io/runnable-uid", "purser.io/deployable"}
)

// IsSystemObject applies the rule to one record.
func IsSystemObject(kind, namespace, name string, labels map[string]string) bool {
	for _, l := range purserLabels {
		if _, ok := labels[l]; ok {
			return false
		}
	}
	for _, ns := range SystemNamespaces {
		if namespace == ns {
			return true
		}
	}
	for _, o := range SystemObjects {
		if kind == o.Kind && name == o.Name {
			return true
		}
	}
	return false
}

// notSystemSQL is the rule's negation as a condition on the inventory's
// columns, built from the same lists. The labels column holds the labels
// as labelsJSON writes them (keys quoted, no spaces), so that a label key
// is present exactly when its quoted form followed by a colon is.
func notSystemSQL() (string, []any) {
	var system []string
	var args []any
	system = append(system, "namespace IN ("+placeholders(len(SystemNamespaces))+")")
	for _, ns := range SystemNamespaces {
		args = append(args, ns)
	}
	for _, o := range SystemObjects {
		system = append(system, "(kind = ? AND name = ?)")
		args = append(args, o.Kind, o.Name)
	}
	var purser []string
	for _, l := range purserLabels {
		purser = append(purser, "labels LIKE ?")
		args = append(args, `%"`+l+`":%`)
	}
	return "(NOT (" + strings.Join(system, " OR ") + ") OR " + strings.Join(purser, " OR ") + ")", args
}
