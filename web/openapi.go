package web

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openAPI describes the REST API; a test checks it against the routes.
//
//go:embed openapi.json
var openAPI []byte

func (s *Server) apiOpenAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPI)
}
