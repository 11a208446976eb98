// Package domain holds, in its sub-packages, what the API and the control
// loops both decide by: what purser knows of each kind it places (kinds),
// what the policy file lets a user do (policy), what a tenant's object may
// make a member cluster run, reviewed as it is written (admission), the
// one way a runnable moves (lifecycle), where a runnable fits (placement)
// and which generation of a deployable each cluster holds (rollout). It
// imports neither the API nor the loops (layering_test.go), so that a rule
// is written once and every writer and handler asks it.
package domain
