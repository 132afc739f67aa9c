// Package modelapi holds test stand-ins for the model APIs the coding-agent
// CLIs call: the OpenAI Responses API (Codex) and the Anthropic Messages
// API (Claude Code), both streaming server-sent events over plain HTTP on
// loopback. Each server answers its model calls from a script of Steps, one
// step per call in call order, and records every request it received, so a
// test can run the real CLI against it and assert on what reached the
// provider. Agents that run at the same time call in no fixed order: Route
// gives the calls whose request names an agent (a phrase of its prompt)
// their own script.
package modelapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
)

// maxRequestBytes bounds a request body the stand-ins read.
const maxRequestBytes = 64 << 20

// Step is the reply to one model call. Exactly one of its fields that
// choose the kind of reply is normally set; the zero Step answers "ok".
type Step struct {
	// Text is the assistant's final message.
	Text string
	// Command asks the agent to run a shell command (Codex: its shell
	// tool; Claude: the Bash tool).
	Command string
	// Read asks Claude to read a file with its Read tool (an absolute
	// path).
	Read string
	// Status answers the call with this HTTP error status and an error
	// body in the provider's shape.
	Status int
	// Drop starts the stream and then closes the connection without its
	// terminal event.
	Drop bool
	// Usage is the token usage the reply reports (zero: small defaults).
	Usage Usage
}

// Usage is what a reply reports as token usage.
type Usage struct {
	Input, CachedInput, Output, Reasoning int
}

func (u Usage) orDefault() Usage {
	if u == (Usage{}) {
		return Usage{Input: 100, CachedInput: 20, Output: 10, Reasoning: 5}
	}
	return u
}

// Request is one request a stand-in received.
type Request struct {
	Method, Path string
	// Auth is the credential the request carried (Authorization or
	// x-api-key header).
	Auth string
	Body json.RawMessage
}

// server is what both stand-ins share: the script, the request record and
// the HTTP server.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	steps    []Step
	next     int
	routes   []*route
	requests []Request
	calls    int
	// unscripted counts the calls no script had a step for.
	unscripted int
}

// route is a script of the calls whose request contains match.
type route struct {
	match string
	steps []Step
	next  int
}

// noRoute is the route of a call that matched none.
const noRoute = -1

// record notes a request and returns its body.
func (s *server) record(r *http.Request, auth string) []byte {
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes))
	s.mu.Lock()
	defer s.mu.Unlock()
	req := Request{Method: r.Method, Path: r.URL.Path, Auth: auth}
	if json.Valid(body) {
		req.Body = body
	}
	s.requests = append(s.requests, req)
	return body
}

// Route gives the model calls whose request body contains match a script
// of their own, answered in their order whatever the other calls do; past
// its end such a call is answered a plain "ok" text. A call is taken by
// the first route (in the order they were added) whose match it contains;
// a call that matches none takes the next step of the ordered script.
// match is compared with the body as it was sent, JSON escapes included:
// a phrase of plain words and spaces matches the text it names.
func (s *server) Route(match string, steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes = append(s.routes, &route{match: match, steps: steps})
}

// step takes the step that answers a call whose request body is body.
func (s *server) step(body []byte) Step {
	st, _ := s.stepOn(body, noRoute)
	return st
}

// stepOn is step for a call on a connection whose earlier call took route
// last (noRoute: none), which a call matching no route stays on: a
// connection is one agent's. It returns the step and the route taken.
func (s *server) stepOn(body []byte, last int) (Step, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	taken := last
	for i, r := range s.routes {
		if bytes.Contains(body, []byte(r.match)) {
			taken = i
			break
		}
	}
	if taken != noRoute {
		r := s.routes[taken]
		if r.next >= len(r.steps) {
			s.unscripted++
			return Step{Text: "ok"}, taken
		}
		r.next++
		return r.steps[r.next-1], taken
	}
	if s.next >= len(s.steps) {
		s.unscripted++
		return Step{Text: "ok"}, noRoute
	}
	s.next++
	return s.steps[s.next-1], noRoute
}

// takeErrorStep consumes the next step when it is an HTTP error and returns its
// status: a connection upgrade is refused the way the call would be.
func (s *server) takeErrorStep() (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next < len(s.steps) && s.steps[s.next].Status != 0 {
		s.calls++
		s.next++
		return s.steps[s.next-1].Status, true
	}
	return 0, false
}

// Requests returns a copy of every request received so far.
func (s *server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Calls is how many model calls the server answered.
func (s *server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Unscripted is how many model calls no script had a step for (each was
// answered a plain "ok" text).
func (s *server) Unscripted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unscripted
}

// Push appends steps to the script.
func (s *server) Push(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, steps...)
}

// sse writes one server-sent event and flushes it.
func sse(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	_, _ = io.WriteString(w, "event: "+event+"\ndata: "+string(b)+"\n\n")
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// drop closes the client's connection without finishing the response.
func drop(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
		}
	}
}
