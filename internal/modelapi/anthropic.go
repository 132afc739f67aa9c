package modelapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
)

// Anthropic is a stand-in for the Anthropic Messages API: POST
// {URL}/v1/messages streams the next scripted step as server-sent events.
// A request without tools (Claude Code's own side calls, such as a title)
// is answered "ok" without taking a step.
type Anthropic struct{ server }

// NewAnthropic starts a stand-in answering with steps in order. Close it
// when done.
func NewAnthropic(steps ...Step) *Anthropic {
	a := &Anthropic{}
	a.steps = steps
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	return a
}

// anthropicRequest is what the stand-in reads of a Messages request.
type anthropicRequest struct {
	Model  string            `json:"model"`
	Stream bool              `json:"stream"`
	Tools  []json.RawMessage `json:"tools"`
}

func (a *Anthropic) serve(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("x-api-key")
	if auth == "" {
		auth = r.Header.Get("Authorization")
	}
	body := a.record(r, auth)
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/messages") {
		http.NotFound(w, r)
		return
	}
	var req anthropicRequest
	_ = json.Unmarshal(body, &req)
	st := Step{Text: "ok"}
	if len(req.Tools) > 0 {
		st = a.step(body)
	}
	if st.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(st.Status)
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{
			"type": anthropicErrorType(st.Status), "message": fmt.Sprintf("stand-in error %d", st.Status)}})
		return
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "msg_side", "type": "message", "role": "assistant", "model": req.Model,
			"content": []any{map[string]any{"type": "text", "text": st.Text}}, "stop_reason": "end_turn",
			"usage": map[string]any{"input_tokens": 1, "output_tokens": 1}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	id := fmt.Sprintf("msg_%d", a.Calls())
	u := st.Usage.orDefault()
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": u.Input, "cache_read_input_tokens": u.CachedInput, "cache_creation_input_tokens": 0, "output_tokens": 1}}})
	if st.Drop {
		drop(w)
		return
	}
	stop := "end_turn"
	switch {
	case st.Command != "" || st.Read != "":
		stop = "tool_use"
		name, input := "Bash", map[string]any{"command": st.Command, "description": "run a command"}
		if st.Read != "" {
			name, input = "Read", map[string]any{"file_path": st.Read}
		}
		in, _ := json.Marshal(input)
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": "toolu_" + id, "name": name, "input": map[string]any{}}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
	default:
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		for _, chunk := range chunks(st.Text) {
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "text_delta", "text": chunk}})
		}
	}
	sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u.Output}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

// textChunkBytes is the size of the text deltas the stand-in streams.
const textChunkBytes = 16

// chunks cuts text into deltas of textChunkBytes (whole runes).
func chunks(text string) []string {
	var out []string
	for len(text) > textChunkBytes {
		cut := textChunkBytes
		for cut < len(text) && text[cut]&0xC0 == 0x80 {
			cut++
		}
		out = append(out, text[:cut])
		text = text[cut:]
	}
	return append(out, text)
}

func anthropicErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusBadRequest:
		return "invalid_request_error"
	}
	return "api_error"
}
