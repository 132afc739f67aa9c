// Package export writes a native run's exports as JSONL: the trace (the
// run's ledger, the exact prompts its agent processes were given and every
// byte they wrote) and the semantic view (the agents' output streams,
// Codex's and Claude's, parsed into a few provider-neutral events). Both
// end with a footer saying what evidence is missing. The writers are
// streaming: they keep only what one process's unfinished output line
// needs, and the same input always gives the same bytes.
package export

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"io"
	"unicode/utf8"
)

// Version is the version of the export formats.
const Version = 1

// Formats.
const (
	FormatTrace    = "trace"
	FormatSemantic = "semantic"
)

// Valid reports whether f names an export format.
func Valid(f string) bool { return f == FormatTrace || f == FormatSemantic }

// Kinds of the evidence items a writer is given, as the recorder stores
// them.
const (
	KindPrompt = "prompt"
	KindStdout = "stdout"
	KindStderr = "stderr"
	KindEnd    = "end"
)

// Item is one evidence record of an agent process: the Turn-th process
// (from 0) of an execution. For a prompt, Attr says how it was given
// ("stdin" or "argv"); for output, Attr is the offset of its first byte
// in the stream; an end's Data is an End.
type Item struct {
	Execution string
	Turn      int
	Kind      string
	Attr      string
	Data      []byte
}

// End is the Data of an end item.
type End struct {
	Stdout          int64 `json:"stdout"`
	Stderr          int64 `json:"stderr"`
	StdoutTruncated bool  `json:"stdoutTruncated,omitempty"`
	StderrTruncated bool  `json:"stderrTruncated,omitempty"`
}

// Missing is one piece of evidence the export does not hold.
type Missing struct {
	// Reason: "run_active" (the run has not finished: more may come),
	// "no_evidence" (an agent execution with no process recorded),
	// "unfinished" (a process whose end was not recorded: still running,
	// or its last output was lost), "gap" (bytes of a stream were lost),
	// "truncated" (a stream went past the kept bound).
	Reason    string `json:"reason"`
	Execution string `json:"execution,omitempty"`
	Turn      *int   `json:"turn,omitempty"`
	Stream    string `json:"stream,omitempty"`
}

// Footer closes an export.
type Footer struct {
	Record   string    `json:"record"`
	Complete bool      `json:"complete"`
	Missing  []Missing `json:"missing"`
	// Unparsed counts the output lines the semantic view could not read
	// (semantic only).
	Unparsed *int `json:"unparsed,omitempty"`
}

// lineWriter writes one JSON value a line, HTML characters unescaped.
type lineWriter struct {
	bw  *bufio.Writer
	enc *json.Encoder
	err error
}

func newLineWriter(w io.Writer) *lineWriter {
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &lineWriter{bw: bw, enc: enc}
}

func (l *lineWriter) write(v any) {
	if l.err == nil {
		l.err = l.enc.Encode(v)
	}
}

func (l *lineWriter) flush() error {
	if l.err == nil {
		l.err = l.bw.Flush()
	}
	return l.err
}

// data is a byte string as JSON: the text itself when it is valid UTF-8,
// else its base64 with encoding "base64".
func data(b []byte) (text, encoding string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}
