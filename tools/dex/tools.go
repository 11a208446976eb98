//go:build tools

// Package tools records what this module builds, so that `go mod tidy`
// keeps its requirements.
package tools

import _ "github.com/dexidp/dex/cmd/dex"
