package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/oecp/oecp/engine/worker"
)

// Bounds and fixed texts of the CLI drivers.
const (
	// chunkBytes is the most text one live output line carries; longer
	// text is split on UTF-8 boundaries.
	chunkBytes = 8 << 10
	// maxDiagnosticBytes bounds a provider failure diagnostic.
	maxDiagnosticBytes = 8 << 10
	// continuePrompt is the whole prompt of a continuation turn in a known
	// session.
	continuePrompt = "Continue"
	// defaultPath is the PATH a CLI gets when the server has none.
	defaultPath = "/usr/local/bin:/usr/bin:/bin"
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

// declared returns the declared variables that are set in the server's
// environment.
func declared(names []string) map[string]string {
	m := map[string]string{}
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			m[n] = v
		}
	}
	return m
}

// envList renders variables as KEY=VALUE entries in name order.
func envList(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// serverPath is the PATH a CLI gets: the server's own, else defaultPath.
func serverPath() string {
	if p := os.Getenv("PATH"); p != "" {
		return p
	}
	return defaultPath
}

// driverErr is a driver failure of harness name.
func driverErr(name, format string, args ...any) error {
	return fmt.Errorf("%w: harness %s: %s", ErrDriver, name, fmt.Sprintf(format, args...))
}

// launch runs one CLI process of turn t: the entry's argv followed by
// args, in t.Dir, in its own process group (passed to t.Started once it
// runs), with exactly env and stdin;
// stdout goes to onLine as it arrives, bounded by MaxStreamBytes, and each
// stderr line becomes a system line. argv over maxArgvItems items or
// maxArgvBytes bytes, and an environment over maxEnvNames entries or
// maxArgvBytes bytes, are refused before anything starts.
func (c cli) launch(ctx context.Context, t Turn, args, env []string, stdin []byte, sinks worker.Sinks, onLine func([]byte)) (worker.ProcessResult, error) {
	argv := append(slices.Clone(c.argv), args...)
	if len(argv) > maxArgvItems || totalBytes(argv) > maxArgvBytes {
		return worker.ProcessResult{}, driverErr(c.name, "argv exceeds %d items or %d bytes", maxArgvItems, maxArgvBytes)
	}
	if len(env) > maxEnvNames || totalBytes(env) > maxArgvBytes {
		return worker.ProcessResult{}, driverErr(c.name, "environment exceeds %d entries or %d bytes", maxEnvNames, maxArgvBytes)
	}
	// Every line, on stdout or stderr, is progress for the stall watchdog.
	w := newWatchdog(ctx, c.stall)
	stderr := worker.Sinks{Output: sinks.Output}
	if sinks.Log != nil {
		stderr.Log = func(_, msg string) { w.progress(); sinks.Log(string(streamSystem), msg) }
	}
	lines := func(line []byte) { w.progress(); onLine(line) }
	res := worker.Process{Argv: argv, Dir: t.Dir, Env: env, Stdin: stdin, MaxStdout: MaxStreamBytes, Sinks: stderr, Lines: lines, Started: t.Started, Confine: t.Confine}.Run(w.ctx)
	if w.stop(ctx) {
		return res, stallError(c.stall)
	}
	return res, nil
}

func totalBytes(ss []string) int {
	n := 0
	for _, s := range ss {
		n += len(s)
	}
	return n
}

// broken describes a process whose stream cannot be judged: it did not
// start, wrote past the stdout cap, or its stream was malformed (bad); ""
// otherwise.
func broken(res worker.ProcessResult, bad error) string {
	switch {
	case res.StartErr != nil || res.Overflow:
		return processProblem(res)
	case bad != nil:
		return "malformed event stream: " + bad.Error()
	}
	return ""
}

// unfinished describes a stream that ended without its terminal event,
// with how the process ended.
func unfinished(what string, res worker.ProcessResult) string {
	if p := processProblem(res); p != "" {
		return "the stream ended without " + what + "; " + p
	}
	return "the stream ended without " + what
}

// processProblem describes a process end that no stream event explains,
// or "" for a clean exit.
func processProblem(res worker.ProcessResult) string {
	switch {
	case res.StartErr != nil:
		return fmt.Sprintf("the process could not start: %v", res.StartErr)
	case res.Overflow:
		return fmt.Sprintf("the event stream is over %d bytes", MaxStreamBytes)
	case res.Exit != nil:
		return "the process exited non-zero: " + res.Exit.Error()
	}
	return ""
}

// attempt is how one CLI process of a turn ended: a reply (ok), or a
// failure described by problem, which the driver may find retryable.
// session is the provider session id the process reported, or the one it
// resumed.
type attempt struct {
	reply     Reply
	session   string
	ok        bool
	problem   string
	retryable bool
	// auth is the HTTP status (401, 403) of a credential the provider
	// refused; 0 otherwise.
	auth int
	// usage is what the process reported; thread the session's
	// cumulative usage after it (Codex).
	usage, thread Usage
	// stalled is a process the stall watchdog ended (problem says so).
	stalled bool
}

// launchFailed is the attempt of a process launch refused or ended as
// stalled.
func launchFailed(err error) attempt {
	return attempt{problem: err.Error(), stalled: errors.Is(err, ErrStalled)}
}

// runAttempt is one CLI process of a turn, resuming session when it is
// not "".
type runAttempt func(ctx context.Context, session, prompt string) attempt

// withContinuation runs a turn with at most one continuation. After a
// failed attempt it publishes the redacted diagnostic as an error line;
// when retry accepts the failure and ctx (which carries the driver
// deadline) has not ended, it publishes a notice and runs once more: the
// literal "Continue" in the known session, or the original prompt in a
// fresh one when no session id is known. A cancelled or expired ctx
// returns ctx's error; every other failure is ErrDriver.
func withContinuation(ctx context.Context, name, label string, t Turn, sinks worker.Sinks, retry func(attempt) bool, run runAttempt) (Reply, error) {
	session := ""
	if t.Resume {
		session = t.Session
	}
	spent := Reply{ThreadUsage: t.ThreadUsage}
	a := run(ctx, session, t.Prompt)
	for again := true; ; again = false {
		spent.Usage = spent.Usage.Plus(a.usage)
		if a.thread != (Usage{}) {
			spent.ThreadUsage = a.thread
		}
		if ctx.Err() != nil {
			return spent, fmt.Errorf("harness %s turn ended: %w", name, ctx.Err())
		}
		if a.ok {
			a.reply.Usage, a.reply.ThreadUsage = spent.Usage, spent.ThreadUsage
			return a.reply, nil
		}
		if a.stalled {
			emit(sinks, streamError, a.problem+": turn ended (--agent-stall-timeout)")
			return spent, fmt.Errorf("%w: harness %s: %s", ErrStalled, name, a.problem)
		}
		emit(sinks, streamError, label+" provider failure: "+diagnostic(a.problem))
		if a.auth != 0 {
			return spent, fmt.Errorf("%w: harness %s: HTTP %d: %s", ErrProviderAuth, name, a.auth, a.problem)
		}
		if !again || !retry(a) {
			return spent, driverErr(name, "%s", a.problem)
		}
		prompt := t.Prompt
		if session = a.session; session != "" {
			prompt = continuePrompt
		}
		emit(sinks, streamSystem, "continuing once after the provider failure")
		a = run(ctx, session, prompt)
	}
}

// fields decodes one JSON object of an event stream; a missing or
// non-string "type" is an error.
func fields(line []byte) (map[string]json.RawMessage, string, error) {
	if !utf8.Valid(line) {
		return nil, "", fmt.Errorf("an event is not UTF-8")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil || m == nil {
		return nil, "", fmt.Errorf("an event is not a JSON object")
	}
	var kind string
	if err := json.Unmarshal(m["type"], &kind); err != nil {
		return nil, "", fmt.Errorf("an event has no string type")
	}
	return m, kind, nil
}

// str is a JSON string member, or "" when absent or of another type.
func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// object is a JSON object member, or nil when absent or of another type.
func object(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	return m
}

// authStatusRE finds an HTTP 401 or 403 in a provider error message
// ("unexpected status 401 Unauthorized", "HTTP 403", "403 Forbidden").
var authStatusRE = regexp.MustCompile(`(?i)(?:status:?\s*|http\s*)(401|403)\b|\b(401) unauthorized\b|\b(403) forbidden\b`)

// authStatus is the credential status (401 or 403) a provider error
// message names, or 0.
func authStatus(msg string) int {
	m := authStatusRE.FindStringSubmatch(msg)
	for _, g := range m[min(1, len(m)):] {
		if n, err := strconv.Atoi(g); err == nil {
			return n
		}
	}
	return 0
}

// isAuthStatus reports whether an HTTP status is a refused credential.
func isAuthStatus(n int) bool { return n == 401 || n == 403 }
