// Package domain holds, in its sub-packages, what the API and the control
// loops both decide by: what purser knows of each kind it places (kinds),
// what a tenant's object may make a member cluster run, reviewed as it is
// written (admission), and the one way a runnable moves (lifecycle). It
// imports neither the API nor the loops (layering_test.go), so that a
// rule is written once and every writer and handler asks it.
package domain
