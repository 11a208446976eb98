package stream

// The Secret rule, shared by the agent that trims what it publishes and
// the ingester that stores it: a Secret's data never leaves its cluster.

// DataHashField is the top-level field that replaces a Secret's data in
// the object an event carries: enough to tell that the data changed,
// nothing to recover it from.
const DataHashField = "dataSHA256"

// IsSecret reports whether apiVersion and kind name a core Secret, whose
// data must never leave the cluster.
func IsSecret(apiVersion, kind string) bool { return apiVersion == "v1" && kind == "Secret" }
