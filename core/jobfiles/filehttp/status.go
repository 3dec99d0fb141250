package filehttp

import (
	"net/http"

	"github.com/gpuportal/gpuportal/core/jobfiles"
)

// status is the HTTP status the server answers a refusal of kind k with.
func status(k jobfiles.Kind) int {
	switch k {
	case jobfiles.NotFound:
		return http.StatusNotFound
	case jobfiles.Denied:
		return http.StatusForbidden
	case jobfiles.TooLarge:
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

// kindOf is the kind of refusal of status, for a reply without a body
// that says it.
func kindOf(status int) jobfiles.Kind {
	switch status {
	case http.StatusNotFound:
		return jobfiles.NotFound
	case http.StatusForbidden:
		return jobfiles.Denied
	case http.StatusRequestEntityTooLarge:
		return jobfiles.TooLarge
	}
	return jobfiles.Invalid
}
