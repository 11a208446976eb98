//go:build tools

// Package tools records what this module builds, so that `go mod tidy`
// keeps its requirements: Flux's kustomize-controller, built into the
// sandbox cache only when the GitOps test asks for it.
package tools

import (
	_ "github.com/fluxcd/kustomize-controller"
)
