// Package web is purser's operator console: a small page of plain HTML,
// CSS and JavaScript that talks to the REST API with the user's token. It
// is embedded in the binary, so `go build` alone yields a working UI and
// the API serves it at /.
package web

import (
	"embed"
	"io/fs"
)

//go:embed static
var files embed.FS

// Static is the UI's files, index.html at the root.
func Static() fs.FS {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the folder is embedded at build time; it cannot be missing
	}
	return sub
}
