package export

import (
	"encoding/json"
	"io"
)

// Trace writes the trace format.
type Trace struct {
	lw      *lineWriter
	tracker *Tracker
}

// NewTrace starts a trace of runID on w with its header line; traceID,
// when given, is the run's OpenTelemetry trace id.
func NewTrace(w io.Writer, runID string, traceID ...string) *Trace {
	t := &Trace{lw: newLineWriter(w), tracker: NewTracker()}
	t.lw.write(header{"header", runID, FormatTrace, Version, first(traceID)})
	return t
}

// header is the first line of an export. TraceID is the run's
// OpenTelemetry trace id, when the server traces.
type header struct {
	Record  string `json:"record"`
	RunID   string `json:"runId"`
	Format  string `json:"format"`
	Version int    `json:"version"`
	TraceID string `json:"traceId,omitempty"`
}

func first(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return ss[0]
}

// Ledger writes one record of the run's ledger: its cursor and its body
// (the stored JSON record, verbatim).
func (t *Trace) Ledger(cursor string, body json.RawMessage) {
	t.lw.write(struct {
		Record string          `json:"record"`
		Cursor string          `json:"cursor"`
		Event  json.RawMessage `json:"event"`
	}{"ledger", cursor, body})
}

type promptLine struct {
	Record    string `json:"record"`
	Execution string `json:"execution"`
	Turn      int    `json:"turn"`
	Via       string `json:"via"`
	Data      string `json:"data"`
	Encoding  string `json:"encoding,omitempty"`
}

type outputLine struct {
	Record    string `json:"record"`
	Execution string `json:"execution"`
	Turn      int    `json:"turn"`
	Stream    string `json:"stream"`
	Offset    int64  `json:"offset"`
	Data      string `json:"data"`
	Encoding  string `json:"encoding,omitempty"`
}

type endLine struct {
	Record    string `json:"record"`
	Execution string `json:"execution"`
	Turn      int    `json:"turn"`
	End
}

// Evidence writes one evidence item: a prompt, an output chunk, or a
// process's end.
func (t *Trace) Evidence(it Item) {
	t.tracker.See(it)
	switch it.Kind {
	case KindPrompt:
		text, enc := data(it.Data)
		t.lw.write(promptLine{"prompt", it.Execution, it.Turn, it.Attr, text, enc})
	case KindStdout, KindStderr:
		text, enc := data(it.Data)
		t.lw.write(outputLine{"output", it.Execution, it.Turn, it.Kind, offset(it.Attr), text, enc})
	case KindEnd:
		var e End
		_ = json.Unmarshal(it.Data, &e)
		t.lw.write(endLine{"end", it.Execution, it.Turn, e})
	}
}

// Close writes the footer and flushes. finished says the run has
// finished; agentExecutions are its executions of agent nodes.
func (t *Trace) Close(finished bool, agentExecutions []string) error {
	missing := t.tracker.Missing(finished, agentExecutions)
	t.lw.write(Footer{Record: "footer", Complete: len(missing) == 0, Missing: missing})
	return t.lw.flush()
}
