package webui

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"html"
	"maps"
	"slices"
)

// WithTraceURL returns a handler whose app page links a native run's trace
// (its id, from the Oecp-Trace-Id header of the run's export) to the
// trace viewer: tmpl is a URL with {traceId} (oecp serve --trace-url), as
// <meta name="oecp-trace-url">. With an empty tmpl the page shows the
// trace id without a link.
func (h *Handler) WithTraceURL(tmpl string) *Handler {
	if tmpl == "" {
		return h
	}
	out := &Handler{files: maps.Clone(h.files)}
	page := out.files["index.html"]
	meta := []byte(`<meta name="oecp-trace-url" content="` + html.EscapeString(tmpl) + `">`)
	charset := []byte(`<meta charset="utf-8">`) // the page's first head element
	body := bytes.Replace(page.body, charset, append(append(slices.Clone(charset), '\n'), meta...), 1)
	sum := sha256.Sum256(body)
	page.body, page.etag = body, `"`+hex.EncodeToString(sum[:12])+`"`
	out.files["index.html"] = page
	return out
}
