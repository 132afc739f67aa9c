package modelapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/coder/websocket"
)

// WebSocket is how the OpenAI stand-in answers Codex's WebSocket upgrade
// to /responses.
type WebSocket int

const (
	// WSServe accepts the WebSocket and answers each response.create
	// message with the next step's events: no retries, no fallback.
	WSServe WebSocket = iota
	// WSFail answers the upgrade with 500, which Codex retries (its
	// "Reconnecting..." error events) before it falls back to HTTP.
	WSFail
)

// maxWSMessageBytes bounds one WebSocket message the stand-in reads.
const maxWSMessageBytes = 64 << 20

// OpenAI is a stand-in for the OpenAI Responses API: {BaseURL}/responses
// answers a WebSocket (per its mode) and POSTs with server-sent events.
type OpenAI struct {
	server
	ws WebSocket
}

// NewOpenAI starts a stand-in answering with steps in order. Close it when
// done.
func NewOpenAI(ws WebSocket, steps ...Step) *OpenAI {
	o := &OpenAI{ws: ws}
	o.steps = steps
	o.Server = httptest.NewServer(http.HandlerFunc(o.serve))
	return o
}

// BaseURL is the Responses API base, path included.
func (o *OpenAI) BaseURL() string { return o.URL + "/v1" }

func (o *OpenAI) serve(w http.ResponseWriter, r *http.Request) {
	body := o.record(r, r.Header.Get("Authorization"))
	if !strings.HasSuffix(r.URL.Path, "/responses") {
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("Upgrade") != "" {
		if o.ws == WSFail {
			http.Error(w, "websocket unavailable", http.StatusInternalServerError)
			return
		}
		if st, ok := o.takeErrorStep(); ok {
			writeOpenAIError(w, st)
			return
		}
		o.websocket(w, r)
		return
	}
	if r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	st := o.step(body)
	if st.Status != 0 {
		writeOpenAIError(w, st.Status)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	evs := responseEvents(st, fmt.Sprintf("resp_%d", o.Calls()), body)
	for _, ev := range evs {
		sse(w, ev["type"].(string), ev)
	}
	if st.Drop {
		drop(w)
	}
}

// websocket serves Codex's Responses WebSocket: every text message is a
// model call, answered with the next step's events as text messages. A
// message that names no route (one that continues a response) stays on
// the route the connection took last.
func (o *OpenAI) websocket(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(maxWSMessageBytes)
	ctx := context.Background()
	taken := noRoute
	for {
		_, msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		o.mu.Lock()
		o.requests = append(o.requests, Request{Method: "WS", Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Body: validJSON(msg)})
		o.mu.Unlock()
		if prewarm(msg) {
			for _, ev := range []map[string]any{{"type": "response.created", "response": map[string]any{"id": "resp_warm"}},
				{"type": "response.completed", "response": map[string]any{"id": "resp_warm", "usage": map[string]any{"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}}}} {
				b, _ := json.Marshal(ev)
				_ = c.Write(ctx, websocket.MessageText, b)
			}
			continue
		}
		var st Step
		st, taken = o.stepOn(msg, taken)
		if st.Status != 0 {
			b, _ := json.Marshal(map[string]any{"type": "error", "status": st.Status, "error": openAIError(st.Status)["error"]})
			_ = c.Write(ctx, websocket.MessageText, b)
			continue
		}
		for _, ev := range responseEvents(st, fmt.Sprintf("resp_%d", o.Calls()), msg) {
			b, _ := json.Marshal(ev)
			if err := c.Write(ctx, websocket.MessageText, b); err != nil {
				return
			}
		}
		if st.Drop {
			return
		}
	}
}

// prewarm reports a response.create with "generate": false, which Codex
// sends to warm the connection up; it is no model call.
func prewarm(msg []byte) bool {
	var m struct {
		Generate *bool `json:"generate"`
	}
	return json.Unmarshal(msg, &m) == nil && m.Generate != nil && !*m.Generate
}

func validJSON(b []byte) json.RawMessage {
	if json.Valid(b) {
		return append(json.RawMessage(nil), b...)
	}
	return nil
}

func writeOpenAIError(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(openAIError(status))
}

func openAIError(status int) map[string]any {
	return map[string]any{"error": map[string]any{
		"message": fmt.Sprintf("stand-in error %d", status), "type": "invalid_request_error", "code": fmt.Sprint(status)}}
}

// responseEvents are the events of one step's response; a dropped stream
// stops after response.created. request is the call's body: the shell
// tool is the one it offers (exec_command with cmd, else shell with a
// command vector).
func responseEvents(st Step, id string, request []byte) []map[string]any {
	evs := []map[string]any{{"type": "response.created", "response": map[string]any{"id": id}}}
	if st.Drop {
		return evs
	}
	var item map[string]any
	if st.Command != "" {
		name, args := "shell", map[string]any{"command": []string{"bash", "-lc", st.Command}}
		if strings.Contains(string(request), `"exec_command"`) {
			name, args = "exec_command", map[string]any{"cmd": st.Command}
		}
		a, _ := json.Marshal(args)
		item = map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": "call_" + id, "name": name, "arguments": string(a)}
	} else {
		item = map[string]any{"type": "message", "id": "msg_" + id, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": st.Text, "annotations": []any{}}}}
	}
	u := st.Usage.orDefault()
	return append(evs,
		map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item},
		map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item},
		map[string]any{"type": "response.completed", "response": map[string]any{
			"id": id, "usage": map[string]any{
				"input_tokens": u.Input, "input_tokens_details": map[string]any{"cached_tokens": u.CachedInput},
				"output_tokens": u.Output, "output_tokens_details": map[string]any{"reasoning_tokens": u.Reasoning},
				"total_tokens": u.Input + u.Output}}})
}
