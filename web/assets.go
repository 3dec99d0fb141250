package web

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/templates"
)

// assets serves the embedded static files. Each file is known by a hash
// of its content: pages link to /static/NAME?v=HASH, which browsers may
// keep for a year since a new content gets a new address; a request
// without the current hash must revalidate, and gets a 304 when the
// browser's copy (its ETag) is current.
type assets struct {
	fsys fs.FS
	sums map[string]string // file name -> content hash
}

// immutable is how long a versioned static file may be kept.
const immutable = "public, max-age=31536000, immutable"

func newAssets(fsys fs.FS) (*assets, error) {
	a := &assets{fsys: fsys, sums: map[string]string{}}
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		a.sums[name] = hex.EncodeToString(sum[:8])
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("static files: %w", err)
	}
	return a, nil
}

// url is the versioned address of the static file name.
func (a *assets) url(name string) string {
	if sum, ok := a.sums[name]; ok {
		return "/static/" + name + "?v=" + sum
	}
	return "/static/" + name
}

// serve answers GET /static/*.
func (a *assets) serve(c echo.Context) error {
	name := c.Param("*")
	sum, ok := a.sums[name]
	if !ok {
		return echo.NewHTTPError(http.StatusNotFound, "no static file "+name)
	}
	h := c.Response().Header()
	h.Set("ETag", `"`+sum+`"`)
	if c.QueryParam("v") == sum {
		h.Set(echo.HeaderCacheControl, immutable)
	} else {
		h.Set(echo.HeaderCacheControl, "no-cache")
	}
	// Whole files only: byte ranges of a compressed answer would not
	// match the file.
	c.Request().Header.Del("Range")
	http.ServeFileFS(c.Response(), c.Request(), a.fsys, name)
	return nil
}

// favicon answers /favicon.ico, which browsers ask for on their own,
// with the portal's icon.
func (a *assets) favicon(c echo.Context) error {
	b, err := fs.ReadFile(a.fsys, "favicon.svg")
	if err != nil {
		return fmt.Errorf("favicon: %w", err)
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=86400")
	return c.Blob(http.StatusOK, "image/svg+xml", b)
}

// withAssetURLs lets the pages of the request link to versioned files.
func (a *assets) withAssetURLs(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		c.SetRequest(r.WithContext(templates.WithAssetURL(r.Context(), a.url)))
		return next(c)
	}
}
