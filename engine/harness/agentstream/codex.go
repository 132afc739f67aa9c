package agentstream

import "encoding/json"

// Codex's `exec --json` event types.
const (
	CodexThreadStarted = "thread.started"
	CodexTurnStarted   = "turn.started"
	CodexTurnCompleted = "turn.completed"
	CodexTurnFailed    = "turn.failed"
	CodexItemStarted   = "item.started"
	CodexItemUpdated   = "item.updated"
	CodexItemCompleted = "item.completed"
	// CodexError is a top-level error: Codex reports the transport
	// retries it recovers from that way too.
	CodexError = "error"
)

// The types of a Codex item.
const (
	CodexAgentMessage = "agent_message"
	CodexReasoning    = "reasoning"
	CodexCommand      = "command_execution"
	CodexFileChange   = "file_change"
	CodexMCPToolCall  = "mcp_tool_call"
	CodexWebSearch    = "web_search"
	CodexTodoList     = "todo_list"
	CodexErrorItem    = "error"
)

// CodexEvent is one event of Codex's stream; the members other than Type
// are those of its type.
type CodexEvent struct {
	Type string
	// ThreadID is thread.started's thread id.
	ThreadID string
	// Item is the item of an item.* event.
	Item CodexItem
	// Usage is turn.completed's usage as given (nil when absent); it is
	// cumulative over the thread.
	Usage json.RawMessage
	// Message is turn.failed's error message, or an error event's.
	Message string
}

// CodexItem is the item of an item event. Fields holds all its members;
// the others are the ones of its type that are strings (Text: an agent
// message's or reasoning's text).
type CodexItem struct {
	Fields
	Type, ID, Text, Status       string
	Command, Server, Tool, Query string
	// Output is a command's aggregated output; Message an error item's
	// message.
	Output, Message string
	// Error is the message of the item's error, HasError whether it
	// carries one (a string, possibly empty).
	Error    string
	HasError bool
	// ExitCode is a command's exit code as given (nil when absent).
	ExitCode json.RawMessage
}

// DecodeCodex reads an event of Decode's members m and type kind.
func DecodeCodex(m Fields, kind string) CodexEvent {
	e := CodexEvent{Type: kind}
	switch kind {
	case CodexThreadStarted:
		e.ThreadID = Str(m["thread_id"])
	case CodexItemStarted, CodexItemUpdated, CodexItemCompleted:
		e.Item = codexItem(Object(m["item"]))
	case CodexTurnCompleted:
		e.Usage = m["usage"]
	case CodexTurnFailed:
		e.Message = Str(Object(m["error"])["message"])
	case CodexError:
		e.Message = Str(m["message"])
	}
	return e
}

func codexItem(item Fields) CodexItem {
	it := CodexItem{Fields: item, Type: Str(item["type"]), ID: Str(item["id"]), Text: Str(item["text"]), Status: Str(item["status"]),
		Command: Str(item["command"]), Server: Str(item["server"]), Tool: Str(item["tool"]), Query: Str(item["query"]),
		Output: Str(item["aggregated_output"]), Message: Str(item["message"]), ExitCode: item["exit_code"]}
	it.Error, it.HasError = StrOK(Object(item["error"])["message"])
	return it
}

// Tokens is turn.completed's usage, and whether it is an object.
func (e CodexEvent) Tokens() (Usage, bool) {
	u := Object(e.Usage)
	if u == nil {
		return Usage{}, false
	}
	return Usage{Input: Int64(u["input_tokens"]), CachedInput: Int64(u["cached_input_tokens"]),
		Output: Int64(u["output_tokens"]), Reasoning: Int64(u["reasoning_output_tokens"])}, true
}

// CodexChange is one change of a file_change item.
type CodexChange struct{ Kind, Path string }

// Changes are a file_change item's changes.
func (it CodexItem) Changes() []CodexChange {
	var changes []CodexChange
	_ = json.Unmarshal(it.Fields["changes"], &changes)
	return changes
}

// CodexTodo is one entry of a todo_list item.
type CodexTodo struct {
	Text      string
	Completed bool
}

// Todos are a todo_list item's entries.
func (it CodexItem) Todos() []CodexTodo {
	var todo []CodexTodo
	_ = json.Unmarshal(it.Fields["items"], &todo)
	return todo
}
