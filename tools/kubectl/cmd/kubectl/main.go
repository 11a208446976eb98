// Command kubectl is Kubernetes' command line, built from its Go module at
// the sandbox's pinned version, for the tests that read purser's
// Kubernetes-shaped API (/k8s) as users do. It is the main of kubernetes'
// cmd/kubectl/kubectl.go: the default command, run by component-base.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
