package web

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// A Jupyter session's pages are Jupyter's own, which know nothing of the
// portal (issue 36: "no way back to the portal"). The proxy puts a small
// link back into each page a browser opens as a document: to the job's
// page in the portal, where the session's time left, its files, its log
// and its stop are. The terminal's page is the portal's and has its own.

// portalLinkID is the link's element ID in the page.
const portalLinkID = "gpuportal-back"

// maxLinkedPage bounds the page the link is put into; a larger one (no
// Jupyter page is) passes through as it is.
const maxLinkedPage = 4 << 20

// wantsPortalLink reports whether r opens a page as a browser's
// document (not a frame, a script or a fetch), where the link belongs.
func wantsPortalLink(r *http.Request) bool {
	if r.Method != http.MethodGet || isWebsocket(r) {
		return false
	}
	if dest := r.Header.Get("Sec-Fetch-Dest"); dest != "" {
		return dest == "document"
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// portalLinkHTML is the link to href: fixed at the page's bottom right
// corner, above Jupyter's status bar, in styles of its own (the page's
// are Jupyter's).
func portalLinkHTML(href string, jobID int64) string {
	return fmt.Sprintf(`<a id="%s" href="%s" title="This session's job in gpuportal: its time left, files, log and stop" `+
		`style="position:fixed;right:12px;bottom:36px;z-index:2147483647;padding:6px 12px;border-radius:16px;`+
		`background:#1f3a5f;color:#fff;font:600 13px/1.2 system-ui,sans-serif;text-decoration:none;`+
		`box-shadow:0 1px 4px rgba(0,0,0,.35)">&larr; gpuportal: job %d</a>`,
		portalLinkID, html.EscapeString(href), jobID)
}

// bodyTag finds a page's <body> start tag.
var bodyTag = regexp.MustCompile(`(?i)<body[^>]*>`)

// addPortalLink puts link into resp, a page, after its <body> tag. A
// response that is not an uncompressed HTML page of 200, or has no body
// tag, passes as it is.
func addPortalLink(resp *http.Response, link string) error {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || mt != "text/html" || resp.Header.Get("Content-Encoding") != "" {
		return nil
	}
	page, err := io.ReadAll(io.LimitReader(resp.Body, maxLinkedPage+1))
	if err != nil {
		return err
	}
	loc := bodyTag.FindIndex(page)
	if len(page) > maxLinkedPage || loc == nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(page), resp.Body), resp.Body}
		return nil
	}
	resp.Body.Close()
	out := make([]byte, 0, len(page)+len(link))
	out = append(append(append(out, page[:loc[1]]...), link...), page[loc[1]:]...)
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
	return nil
}
