//go:build tools

// Package tools records what this module builds, so that `go mod tidy`
// keeps its requirements: Karmada's control plane, built into the sandbox
// cache only when the Karmada benchmark asks for it.
package tools

import (
	_ "github.com/karmada-io/karmada/cmd/aggregated-apiserver"
	_ "github.com/karmada-io/karmada/cmd/controller-manager"
	_ "github.com/karmada-io/karmada/cmd/scheduler"
	_ "github.com/karmada-io/karmada/cmd/webhook"
)
