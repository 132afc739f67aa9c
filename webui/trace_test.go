package webui_test

import (
	"strings"
	"testing"

	"github.com/oecp/oecp/webui"
)

// --trace-url reaches the app page as <meta name="oecp-trace-url">,
// escaped; without it the page has none.
func TestTraceURLMeta(t *testing.T) {
	plain := body(t, get(t, webui.New().WithTraceURL(""), "GET", "/ui/", nil))
	if strings.Contains(plain, "oecp-trace-url") {
		t.Fatal("a page without --trace-url names one")
	}
	page := body(t, get(t, webui.New().WithTraceURL(`http://jaeger:16686/trace/{traceId}?a=1&b="x"`), "GET", "/ui/runs/r1", nil))
	if !strings.Contains(page, `<meta name="oecp-trace-url" content="http://jaeger:16686/trace/{traceId}?a=1&amp;b=&#34;x&#34;">`) {
		t.Fatalf("page:\n%s", page)
	}
	js := body(t, get(t, webui.New(), "GET", "/ui/assets/js/trace.js", nil))
	if !strings.Contains(js, "Oecp-Trace-Id") {
		t.Fatal("trace.js does not read the export's trace id")
	}
}
