package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/purser-io/purser/internal/sandbox"
)

// version is set at release time with -ldflags "-X main.version=v1.2.3"
// (the Dockerfile and make build do).
var version = ""

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print purser's version",
		Long: `Print purser's version: the release it was stamped with, else the module
version and the commit the Go toolchain recorded (go build in a git
checkout records it), else why there is none.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, ok := debug.ReadBuildInfo()
			fmt.Fprintf(cmd.OutOrStdout(), "purser %s\n", buildVersion(version, info, ok))
			fmt.Fprintf(cmd.OutOrStdout(), "go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
			fmt.Fprintf(cmd.OutOrStdout(), "sandbox: kubernetes %s, etcd %s, kwok %s, argo workflows %s\n",
				sandbox.KubernetesVersion, sandbox.EtcdVersion, sandbox.KwokVersion, sandbox.ArgoVersion)
			return nil
		},
	}
}

// buildVersion is the release version, else the module version with the
// commit that `go build` in a git checkout records (vcs.revision, vcs.time,
// vcs.modified of the build info), else a word on why there is none: the
// Go toolchain records nothing with -buildvcs=false, nor in a linked git
// worktree, whose .git is a file it does not recognise (golang/go#58218).
func buildVersion(release string, info *debug.BuildInfo, ok bool) string {
	if release != "" {
		return release
	}
	if !ok {
		return "unknown (no build information in the binary)"
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev, at, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		if v != "devel" {
			return v // go install module@version
		}
		return "devel (no commit recorded: built with -buildvcs=false or in a git worktree; make build stamps it)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v += " (commit " + rev
	if at != "" {
		v += " of " + at
	}
	if modified == "true" {
		v += ", with uncommitted changes"
	}
	return v + ")"
}
