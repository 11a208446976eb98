package health

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/purser-io/purser/internal/domain/kinds"
)

// withoutBuiltin are the kinds whose driver runs work but which no
// built-in interpreter judges yet, each with why. Their runnables are
// Unknown unless the configuration's healthRules judge them. A kind that
// gains a built-in must leave this list.
var withoutBuiltin = map[schema.GroupKind]string{
	kinds.Pod: "a bare Pod is rarely a runnable (a Job runs one pod with retries); its phase would need a rule " +
		"of its own (restartPolicy decides whether Succeeded can come), not written yet",
	kinds.CronJob: "a CronJob never ends and its health is that of the Jobs it starts, which the inventory keeps " +
		"as objects of their own; no rule says how to fold them yet",
	kinds.ReplicaSet: "a ReplicaSet is made by a Deployment, which is judged; one placed alone has no rule yet",
}

// TestEveryRunnableDriverKindHasHealth: health stays a table of its own
// (rules per apiVersion, configured CEL rules first), so this keeps it
// beside the drivers: every kind whose driver counts the pods of the work
// it runs (kinds.Demander) has a built-in interpreter, unless it is listed
// above with the reason.
func TestEveryRunnableDriverKindHasHealth(t *testing.T) {
	reg := kinds.Default()
	judged := map[schema.GroupKind]bool{}
	for k := range builtins {
		group, _, ok := strings.Cut(k.apiVersion, "/")
		if !ok {
			group = ""
		}
		judged[schema.GroupKind{Group: group, Kind: k.kind}] = true
	}
	for _, gk := range reg.Kinds() {
		d, _ := reg.Driver(gk)
		if _, runs := d.(kinds.Demander); !runs {
			continue
		}
		why, excused := withoutBuiltin[gk]
		switch {
		case judged[gk] && excused:
			t.Errorf("%s has a built-in interpreter now: drop it from withoutBuiltin (%q)", gk, why)
		case !judged[gk] && !excused:
			t.Errorf("%s has a driver that runs work but no built-in health interpreter: add one to builtins, "+
				"or list it in withoutBuiltin with why", gk)
		}
	}
	for gk := range withoutBuiltin {
		if d, ok := reg.Driver(gk); !ok {
			t.Errorf("withoutBuiltin lists %s, which has no driver", gk)
		} else if _, runs := d.(kinds.Demander); !runs {
			t.Errorf("withoutBuiltin lists %s, whose driver runs no work", gk)
		}
	}
}
