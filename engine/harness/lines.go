package harness

import (
	"strings"
	"unicode/utf8"

	"github.com/oecp/oecp/engine/worker"
)

// How a CLI's output reaches the execution's sinks: live lines, split on
// UTF-8 boundaries, and bounded diagnostics.

// Bounds and fixed texts of the CLI drivers.
const (
	// chunkBytes is the most text one live output line carries; longer
	// text is split on UTF-8 boundaries.
	chunkBytes = 8 << 10
	// maxDiagnosticBytes bounds a provider failure diagnostic.
	maxDiagnosticBytes = 8 << 10
)

// stream is the kind of a live output line, named by its log level:
// assistant text is output (info), provider failures are errors, and
// progress, reasoning, tool activity and runtime notices are system lines
// (debug).
type stream string

const (
	streamOutput stream = "info"
	streamError  stream = "error"
	streamSystem stream = "debug"
)

// emit publishes text on a stream in pieces of at most chunkBytes; empty
// text publishes nothing.
func emit(s worker.Sinks, st stream, text string) {
	for len(text) > chunkBytes {
		cut := chunkBytes
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		if cut == 0 { // no rune starts in the chunk: not UTF-8, cut anywhere
			cut = chunkBytes
		}
		publish(s, string(st), text[:cut])
		text = text[cut:]
	}
	if text != "" {
		publish(s, string(st), text)
	}
}

// emitLines publishes each non-empty line of text on a stream.
func emitLines(s worker.Sinks, st stream, text string) {
	for _, line := range strings.Split(text, "\n") {
		emit(s, st, strings.TrimSuffix(line, "\r"))
	}
}

// lineBuffer gathers text that arrives in small pieces (a model's deltas)
// and publishes it a line at a time; flush publishes the rest.
type lineBuffer struct {
	sinks worker.Sinks
	st    stream
	buf   strings.Builder
}

func (b *lineBuffer) add(text string) {
	b.buf.WriteString(text)
	s := b.buf.String()
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		emitLines(b.sinks, b.st, s[:i])
		b.buf.Reset()
		b.buf.WriteString(s[i+1:])
	} else if len(s) >= chunkBytes {
		b.flush()
	}
}

func (b *lineBuffer) flush() {
	emitLines(b.sinks, b.st, b.buf.String())
	b.buf.Reset()
}

// diagnostic makes a provider failure message fit for a log line: control
// characters other than newline and tab become spaces, and it is cut to
// maxDiagnosticBytes.
func diagnostic(msg string) string {
	msg = strings.Map(func(r rune) rune {
		if r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f)) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(msg, "\uFFFD"))
	return truncateUTF8(msg, maxDiagnosticBytes)
}

// truncateUTF8 cuts s to at most n bytes on a UTF-8 boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
