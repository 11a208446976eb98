package kinds

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// An Argo resource template runs `kubectl <action> <flags...> -f
// <manifest>` (Argo Workflows' executor, getKubectlArguments: the flags
// are appended as written, the manifest after them, and with flags but no
// manifest the flags alone say what kubectl acts on). Purser reads the
// flags with the library kubectl reads them with (spf13/pflag: -nX, -n X,
// -n=X, --namespace=X and --namespace X are one flag; a bool flag takes
// no next argument; arguments that are not flags are positional), and
// knows each flag it lets through: anything else cannot be judged before
// it runs, and refuses the workflow.

// flagVerdict is what a kubectl flag means for judging the template.
type flagVerdict int

const (
	// flagHarmless changes how the written manifest is applied, not what
	// or where.
	flagHarmless flagVerdict = iota
	// flagNamespace names the namespace the action runs in.
	flagNamespace
	// flagElsewhere points kubectl at another cluster, identity or every
	// namespace.
	flagElsewhere
	// flagUnseen brings objects or changes from somewhere no field of the
	// workflow shows (a file, a URL, a literal, a raw API path).
	flagUnseen
)

type kubectlFlag struct {
	name, short string
	bool        bool   // takes no value
	noOpt       string // takes a value, but only after '=' (pflag's NoOptDefVal)
	verdict     flagVerdict
}

// kubectlFlags are kubectl's global flags and those of the actions an
// Argo resource template runs (get, create, apply, replace, delete,
// patch) that purser knows, with their arity as kubectl declares them.
var kubectlFlags = []kubectlFlag{
	{name: "namespace", short: "n", verdict: flagNamespace},
	{name: "all-namespaces", short: "A", bool: true, verdict: flagElsewhere},
	{name: "kubeconfig", verdict: flagElsewhere},
	{name: "context", verdict: flagElsewhere},
	{name: "cluster", verdict: flagElsewhere},
	{name: "user", verdict: flagElsewhere},
	{name: "server", short: "s", verdict: flagElsewhere},
	{name: "token", verdict: flagElsewhere},
	{name: "as", verdict: flagElsewhere},
	{name: "as-group", verdict: flagElsewhere},
	{name: "as-uid", verdict: flagElsewhere},
	{name: "username", verdict: flagElsewhere},
	{name: "password", verdict: flagElsewhere},
	{name: "certificate-authority", verdict: flagElsewhere},
	{name: "client-certificate", verdict: flagElsewhere},
	{name: "client-key", verdict: flagElsewhere},
	{name: "tls-server-name", verdict: flagElsewhere},
	{name: "insecure-skip-tls-verify", bool: true, verdict: flagElsewhere},
	{name: "cache-dir", verdict: flagElsewhere},
	{name: "kuberc", verdict: flagElsewhere},
	{name: "filename", short: "f", verdict: flagUnseen},
	{name: "kustomize", short: "k", verdict: flagUnseen},
	{name: "recursive", short: "R", bool: true, verdict: flagUnseen},
	{name: "raw", verdict: flagUnseen},
	{name: "patch", short: "p", verdict: flagUnseen},
	{name: "patch-file", verdict: flagUnseen},
	{name: "from-literal", verdict: flagUnseen},
	{name: "from-file", verdict: flagUnseen},
	{name: "from-env-file", verdict: flagUnseen},
	{name: "prune", bool: true, verdict: flagUnseen},
	{name: "validate", noOpt: "strict", verdict: flagHarmless},
	{name: "overwrite", bool: true, verdict: flagHarmless},
	{name: "server-side", bool: true, verdict: flagHarmless},
	{name: "force-conflicts", bool: true, verdict: flagHarmless},
	{name: "field-manager", verdict: flagHarmless},
	{name: "wait", bool: true, verdict: flagHarmless},
	{name: "timeout", verdict: flagHarmless},
	{name: "cascade", noOpt: "background", verdict: flagHarmless},
	{name: "grace-period", verdict: flagHarmless},
	{name: "force", bool: true, verdict: flagHarmless},
	{name: "ignore-not-found", bool: true, verdict: flagHarmless},
	{name: "selector", short: "l", verdict: flagHarmless},
	{name: "dry-run", noOpt: "unchanged", verdict: flagHarmless},
	{name: "save-config", bool: true, verdict: flagHarmless},
	{name: "record", bool: true, verdict: flagHarmless},
	{name: "type", verdict: flagHarmless},
	{name: "output", short: "o", verdict: flagHarmless},
	{name: "request-timeout", verdict: flagHarmless},
	{name: "v", short: "v", verdict: flagHarmless},
	{name: "all", bool: true, verdict: flagHarmless},
	{name: "show-managed-fields", bool: true, verdict: flagHarmless},
}

// KubectlArgs is what a resource template's flags say.
type KubectlArgs struct {
	// Namespace is the value of --namespace (the last one, as pflag keeps
	// it), and NamespaceFlag the flag as written.
	Namespace, NamespaceFlag string
	// Positional are the arguments that are not flags (a kind and name,
	// "secret generic x").
	Positional []string
}

// ParseKubectlFlags reads flags as kubectl would, and refuses the ones
// that cannot be judged: a flag purser does not know, one pointing
// kubectl at another cluster or identity or at every namespace, and one
// bringing content no field shows. The error quotes the flag as written.
func ParseKubectlFlags(flags []string) (KubectlArgs, error) {
	fs := pflag.NewFlagSet("kubectl", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	byName := map[string]kubectlFlag{}
	for _, f := range kubectlFlags {
		byName[f.name] = f
		if f.bool {
			fs.BoolP(f.name, f.short, false, "")
		} else {
			// StringArray keeps every value, so that a repeated flag is
			// seen whole.
			fs.StringArrayP(f.name, f.short, nil, "")
			if f.noOpt != "" {
				fs.Lookup(f.name).NoOptDefVal = f.noOpt
			}
		}
	}
	var out KubectlArgs
	var refused error
	// pflag calls this for every flag in the order written, with the
	// name it resolved a shorthand to.
	err := fs.ParseAll(flags, func(flag *pflag.Flag, value string) error {
		if err := fs.Set(flag.Name, value); err != nil {
			return err
		}
		k := byName[flag.Name]
		written := writtenAs(flags, k)
		switch k.verdict {
		case flagNamespace:
			out.Namespace, out.NamespaceFlag = value, written
		case flagElsewhere:
			if refused == nil {
				refused = fmt.Errorf("flag %q would point kubectl at another cluster, identity or every namespace", written)
			}
		case flagUnseen:
			if refused == nil {
				refused = fmt.Errorf("flag %q brings what kubectl acts on from somewhere the workflow does not show, so it cannot be judged; write the object in manifest", written)
			}
		}
		return nil
	})
	if err != nil {
		return KubectlArgs{}, fmt.Errorf("flags %q: %w (purser lets through only the kubectl flags it can judge)", flags, err)
	}
	if refused != nil {
		return KubectlArgs{}, refused
	}
	out.Positional = fs.Args()
	return out, nil
}

// writtenAs finds how flag k was written in flags, for the message.
func writtenAs(flags []string, k kubectlFlag) string {
	for _, f := range flags {
		if f == "--"+k.name || strings.HasPrefix(f, "--"+k.name+"=") {
			return f
		}
		if k.short == "" || len(f) < 2 || f[0] != '-' || f[1] == '-' {
			continue
		}
		// A run of shorthands: bool ones may stand together (-Rf); the
		// first that takes a value ends the run, the rest is its value.
		for _, c := range f[1:] {
			if string(c) == k.short {
				return f
			}
			if s := shorthand(string(c)); s == nil || !s.bool {
				break
			}
		}
	}
	if k.short != "" {
		return "-" + k.short
	}
	return "--" + k.name
}

func shorthand(s string) *kubectlFlag {
	for i := range kubectlFlags {
		if kubectlFlags[i].short == s {
			return &kubectlFlags[i]
		}
	}
	return nil
}

// actionsNamingObjects are the resource template actions that may name
// what they act on in flags: they create nothing, and what they touch is
// still bound to the namespace.
var actionsNamingObjects = []string{"get", "delete"}

func actionMayName(action string) bool { return slices.Contains(actionsNamingObjects, action) }
