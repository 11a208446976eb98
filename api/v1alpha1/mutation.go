package v1alpha1

import (
	"fmt"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
)

// MutationVariable is the CEL variable that holds a Runnable's preserved
// state, a map(string, string) keyed by aliasLabelName.
const MutationVariable = "preserved"

// RestorePathVariable is the CEL variable that holds the path of the
// restore point the next attempt carries (status.restorePoint.path), ""
// when there is none.
const RestorePathVariable = "restorePath"

// maxExpressionLength bounds mutation expressions, in code points, so that a
// request cannot make compiling them expensive; real ones are one line.
const maxExpressionLength = 4096

// NewMutationEnv returns the CEL environment in which failover mutations are
// compiled and evaluated. Validation and the failover controller must use
// the same one: an expression accepted here has to run there.
func NewMutationEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable(MutationVariable, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(RestorePathVariable, cel.StringType),
		cel.ParserExpressionSizeLimit(maxExpressionLength),
	)
}

// mutationEnv builds the environment once, on first validation, and shares
// it: a cel.Env is immutable and safe for concurrent use, and building one
// costs more than compiling a short expression.
var mutationEnv = sync.OnceValues(NewMutationEnv)

// compileMutation compiles expr in the mutation environment; wantBool asks
// that it yield a bool (or dyn, which is checked when it runs).
func compileMutation(expr string, wantBool bool) string {
	env, err := mutationEnv()
	if err != nil {
		return "cannot be checked: " + err.Error()
	}
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		msgs := make([]string, 0, len(iss.Errors()))
		for _, e := range iss.Errors() {
			// The parser lists every token it could have taken; the position
			// and the token it found say enough.
			msg, _, _ := strings.Cut(e.Message, " expecting {")
			msgs = append(msgs, fmt.Sprintf("%d:%d: %s", e.Location.Line(), e.Location.Column()+1, msg))
		}
		return "is not a valid CEL expression over " + MutationVariable + " and " + RestorePathVariable + ": " + strings.Join(msgs, "; ")
	}
	if wantBool {
		out := ast.OutputType()
		if !out.IsExactType(cel.BoolType) && !out.IsExactType(cel.DynType) {
			return "must be a CEL expression that gives a bool, not " + out.String()
		}
	}
	return ""
}
