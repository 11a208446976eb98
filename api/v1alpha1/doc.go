// Package v1alpha1 holds the objects of purser's API (Runnable, Deployable,
// Cluster) and everything that judges a request body before it reaches the
// store: strict decoding of JSON and YAML, defaults and validation.
//
// It is the vocabulary that the server, the CLI and every controller share,
// so it stays pure: no I/O, no clients, and no package state beyond values
// built once and never changed (a regexp, the CEL environment). Decode and
// the Validate functions report problems by field path
// (spec.failover.mutations[0].when), so that the server can answer 400 for a
// body it cannot read and 422, with details, for one it can read but must
// refuse.
package v1alpha1
