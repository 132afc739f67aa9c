package modelapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// anthropicText posts a non-streamed Messages request with a tool and
// prompt as its message, and returns the reply's text.
func anthropicText(t *testing.T, a *Anthropic, prompt string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "m", "tools": []any{map[string]any{"name": "Bash"}},
		"messages": []any{map[string]any{"role": "user", "content": prompt}}})
	resp, err := http.Post(a.URL+"/v1/messages", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct{ Content []struct{ Text string } }
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || len(m.Content) != 1 {
		t.Fatalf("reply %+v: %v", m, err)
	}
	return m.Content[0].Text
}

// Calls naming a route are answered from its own script in their order,
// however they interleave with another route's; a call naming none takes
// the ordered script; a route past its end answers "ok".
func TestRouteAnswersEachAgentInItsOwnOrder(t *testing.T) {
	a := NewAnthropic(Step{Text: "ordered 1"})
	defer a.Close()
	a.Route("You are the reviewer", Step{Text: "review 1"}, Step{Text: "review 2"})
	a.Route("You are the writer", Step{Text: "write 1"})
	for _, c := range []struct{ prompt, want string }{
		{"You are the reviewer. Judge it.", "review 1"},
		{"You are the writer. Write it.", "write 1"},
		{"Something else.", "ordered 1"},
		{"You are the reviewer, again.", "review 2"},
		{"You are the writer, again.", "ok"},
		{"You are the reviewer, a third time.", "ok"},
	} {
		if got := anthropicText(t, a, c.prompt); got != c.want {
			t.Errorf("%q answered %q, want %q", c.prompt, got, c.want)
		}
	}
	if n, u := a.Calls(), a.Unscripted(); n != 6 || u != 2 {
		t.Errorf("Calls() = %d, Unscripted() = %d, want 6 and 2", n, u)
	}
}

// wsText sends one response.create on c and returns the text its
// response's message item carries.
func wsText(t *testing.T, c *websocket.Conn, input string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msg, _ := json.Marshal(map[string]any{"type": "response.create", "input": input})
	if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
		t.Fatal(err)
	}
	text := ""
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			Type string
			Item struct{ Content []struct{ Text string } }
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "response.output_item.done" && len(ev.Item.Content) == 1 {
			text = ev.Item.Content[0].Text
		}
		if ev.Type == "response.completed" {
			return text
		}
	}
}

// On Codex's WebSocket, a call that continues a response (its input names
// no route) stays on the route its connection took, while the ordered
// script answers a connection that took none.
func TestRouteHoldsAWebSocketConnection(t *testing.T) {
	o := NewOpenAI(WSServe, Step{Text: "ordered 1"}, Step{Text: "ordered 2"})
	defer o.Close()
	o.Route("You are the writer", Step{Text: "write 1"}, Step{Text: "write 2"})
	dial := func() *websocket.Conn {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(o.BaseURL(), "http")+"/responses", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.CloseNow() })
		return c
	}
	writer, other := dial(), dial()
	for _, c := range []struct {
		conn        *websocket.Conn
		input, want string
	}{
		{other, "a tool's output", "ordered 1"},
		{writer, "You are the writer.", "write 1"},
		{writer, "a tool's output", "write 2"},
		{other, "another tool's output", "ordered 2"},
	} {
		if got := wsText(t, c.conn, c.input); got != c.want {
			t.Errorf("%q answered %q, want %q", c.input, got, c.want)
		}
	}
}
