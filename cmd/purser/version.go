package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/sandbox"
)

// version is set at release time with -ldflags "-X main.version=v1.2.3".
var version = ""

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print purser's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "purser %s\n", buildVersion())
			fmt.Fprintf(cmd.OutOrStdout(), "go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
			fmt.Fprintf(cmd.OutOrStdout(), "sandbox: kubernetes %s, etcd %s, kwok %s, argo workflows %s\n",
				sandbox.KubernetesVersion, sandbox.EtcdVersion, sandbox.KwokVersion, sandbox.ArgoVersion)
			return nil
		},
	}
}

// buildVersion is the release version, else the module version and the
// commit the binary was built from.
func buildVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "-dirty"
			}
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += " (" + rev + modified + ")"
	}
	return v
}
