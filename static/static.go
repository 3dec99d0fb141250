// Package static holds the portal's style sheet, scripts and the vendored
// front-end libraries (htmx, uPlot), embedded in the binary.
package static

import "embed"

// FS holds the files served under /static/.
//
//go:embed *.css *.js *.svg vendor clients/*.py
var FS embed.FS
