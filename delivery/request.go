package delivery

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// maxTitleRunes bounds a pull request's title taken from the delivery's
// input.
const maxTitleRunes = 120

// closesRE is an issue reference a pull request may close: "#N" in the
// delivered repository, or "PATH#N" (OWNER/NAME, or a GitLab group path)
// in another; at most maxClosesBytes.
var closesRE = regexp.MustCompile(`^(?:[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)+)?#[1-9][0-9]{0,17}$`)

// maxClosesBytes bounds an issue reference.
const maxClosesBytes = 300

// request is what a delivery node's input asks of the pull request: its
// title (the first line with text of the input's "title"), and the issue
// it closes (the input's "closes"). Both are optional; an input that is
// no record asks for neither.
type request struct {
	title  string
	closes string
}

// parseRequest reads a delivery node's input. A "closes" that is no issue
// reference is an error: the pull request would not close what the run
// names.
func parseRequest(input json.RawMessage) (request, error) {
	var in struct {
		Title  *string `json:"title"`
		Closes *string `json:"closes"`
	}
	if len(input) == 0 || input[0] != '{' || json.Unmarshal(input, &in) != nil {
		return request{}, nil
	}
	var r request
	if in.Title != nil {
		r.title = TitleOf(*in.Title, maxTitleRunes)
	}
	if in.Closes != nil && *in.Closes != "" {
		if len(*in.Closes) > maxClosesBytes || !closesRE.MatchString(*in.Closes) {
			return request{}, fmt.Errorf("the input's closes %q is not an issue reference (#N or OWNER/NAME#N)", shorten(*in.Closes, 60))
		}
		r.closes = *in.Closes
	}
	return r, nil
}

// TitleOf is a title taken from text: its first line with text, without
// Markdown's heading marks, its control characters made spaces, shortened
// to at most n runes; "" when no line has text.
func TitleOf(text string, n int) string {
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return ' '
			}
			return r
		}, line)
		if line = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "#")); line != "" {
			return shorten(line, n)
		}
	}
	return ""
}

// shorten cuts s to at most n runes, marking a cut with "…".
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// pullTitle is the title of the run's pull request: the requested one,
// else one naming the run.
func (r request) pullTitle(runID string) string {
	if r.title != "" {
		return r.title
	}
	return "oecp: run " + runID
}

// pullBody is the body of the run's pull request: where it comes from,
// then the closing keyword for the issue it closes.
func (r request) pullBody(runID string, t target) string {
	body := fmt.Sprintf("Delivered by oecp from run %s: branch %s at %s, based on %s.", runID, t.branch, t.head, t.base)
	if r.closes != "" {
		body += "\n\nCloses " + r.closes
	}
	return body
}
