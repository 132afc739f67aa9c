package harness

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/oecp/oecp/engine/harness/agentstream"
	"github.com/oecp/oecp/engine/worker"
)

// Bounds of a Claude process.
const (
	// maxClaudePromptBytes bounds the prompt, which travels in argv. A
	// line of the stream is bounded only by the process's stdout cap
	// (MaxStreamBytes): Claude Code repeats a tool's whole output in one
	// event, and a long session emits thousands of events.
	maxClaudePromptBytes = 64 << 10
	// openRouterAnthropicURL is the Anthropic-compatible OpenRouter API.
	openRouterAnthropicURL = "https://openrouter.ai/api"
)

var (
	// claudeBase are the variables the driver itself sets; a node may not
	// declare them.
	claudeBase = []string{"HOME", "LANG", "LC_ALL", "PATH", "TERM", "TMPDIR", "IS_SANDBOX"}
	// claudeForbidden are variables that would send the prompt elsewhere
	// or replace the private configuration.
	claudeForbidden = []string{"ANTHROPIC_BASE_URL", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY"}
)

// claudeDriver runs Claude Code: `claude --print … --output-format
// stream-json` once per process, the prompt as the last argument and stdin
// closed, in the turn's directory with a private HOME and TMPDIR. Writers
// skip permission prompts (`--dangerously-skip-permissions`); verifiers
// run in plan mode, which changes nothing. It reads the stream-json
// events: text deltas are output lines, thinking, API retries and tool
// calls system lines, the session_id the session, the result the answer.
type claudeDriver struct{ cli }

func (d *claudeDriver) Turn(ctx context.Context, t Turn, sinks worker.Sinks) (Reply, error) {
	if err := d.checkEnv(t.Env); err != nil {
		return Reply{}, err
	}
	switch {
	case t.Dir == "" || t.Home == "":
		return Reply{}, driverErr(d.name, "no working directory or private home")
	case len(t.Prompt) > maxClaudePromptBytes || strings.ContainsRune(t.Prompt, 0):
		return Reply{}, driverErr(d.name, "the prompt is over %d bytes or holds a NUL", maxClaudePromptBytes)
	case t.Resume && t.Session == "":
		return Reply{}, driverErr(d.name, "no session id to continue")
	}
	env, err := claudeEnv(t, d.baseURL)
	if err != nil {
		return Reply{}, driverErr(d.name, "%v", err)
	}
	run := func(ctx context.Context, session, prompt string) attempt {
		pctx, stop := context.WithCancel(ctx)
		defer stop()
		s := &claudeStream{session: session, text: lineBuffer{sinks: sinks, st: streamOutput}, thinking: lineBuffer{sinks: sinks, st: streamSystem}, stop: stop,
			tools: newToolSpans(ctx)}
		defer s.tools.close()
		res, err := d.launch(pctx, t, claudeArgs(t, session, prompt), env, nil, sinks, s.line)
		if err != nil {
			return launchFailed(err)
		}
		return s.end(res)
	}
	// Claude continues only after a failure that followed an API retry.
	return withContinuation(ctx, d.name, "Claude", t, sinks, func(a attempt) bool { return a.retryable }, run)
}

// claudeEnv is the process environment: PATH and whichever of LANG,
// LC_ALL and TERM the server has, HOME and TMPDIR set to the private home,
// and the declared variables. With the openrouter provider the key goes
// to ANTHROPIC_AUTH_TOKEN against OpenRouter's Anthropic API. baseURL,
// when set, is ANTHROPIC_BASE_URL. A server running as root sets
// IS_SANDBOX=1, without which Claude Code refuses to skip permission
// prompts as root.
func claudeEnv(t Turn, baseURL string) ([]string, error) {
	env := declared(t.Env)
	for _, n := range append(claudeBase, claudeForbidden...) {
		if _, ok := env[n]; ok {
			return nil, fmt.Errorf("a claude node may not declare %s", n)
		}
	}
	if t.Provider == providerOpenRouter {
		key := env["OPENROUTER_API_KEY"]
		_, token := env["ANTHROPIC_AUTH_TOKEN"]
		_, apiKey := env["ANTHROPIC_API_KEY"]
		if key == "" || token || apiKey {
			return nil, fmt.Errorf("the openrouter provider needs a non-empty OPENROUTER_API_KEY and no ANTHROPIC_AUTH_TOKEN or ANTHROPIC_API_KEY")
		}
		env["ANTHROPIC_AUTH_TOKEN"], env["ANTHROPIC_API_KEY"], env["ANTHROPIC_BASE_URL"] = key, "", openRouterAnthropicURL
	}
	for _, n := range []string{"LANG", "LC_ALL", "TERM"} {
		if v, ok := os.LookupEnv(n); ok {
			env[n] = v
		}
	}
	if baseURL != "" {
		env["ANTHROPIC_BASE_URL"] = baseURL
	}
	if os.Geteuid() == 0 {
		env["IS_SANDBOX"] = "1"
	}
	env["PATH"], env["HOME"], env["TMPDIR"] = serverPath(), t.Home, t.Home
	return envList(env), nil
}

// claudeArgs is the argv after the entry's. Only the private home's user
// settings apply (--setting-sources user) and no MCP server configuration
// (--strict-mcp-config): the workspace's .claude/ settings and .mcp.json
// could otherwise send the request and its key elsewhere or change the
// permissions the turn runs with.
func claudeArgs(t Turn, session, prompt string) []string {
	a := []string{"--print", "--input-format", "text", "--output-format", "stream-json", "--verbose", "--include-partial-messages",
		"--setting-sources", "user", "--strict-mcp-config", "--model", t.Model}
	if t.Effort != "" {
		a = append(a, "--effort", t.Effort)
	}
	if t.Verifier {
		a = append(a, "--permission-mode", "plan")
	} else {
		a = append(a, "--dangerously-skip-permissions")
	}
	if session != "" {
		a = append(a, "--resume", session)
	}
	return append(a, prompt)
}

// claudeStream folds one process's stream-json events.
type claudeStream struct {
	session        string
	text, thinking lineBuffer
	events         int
	textSeen       bool
	retrySeen      bool
	newline        bool
	result         *claudeResult
	// auth is the 401/403 status of an API retry; stop ends the process
	// at once.
	auth  int
	stop  func()
	usage Usage
	bad   error
	// model is the model the init event named; tools the open tool-call
	// spans (trace.go).
	model string
	tools *toolSpans
}

type claudeResult struct {
	ok     bool
	answer string
	diag   string
}

func (s *claudeStream) line(raw []byte) {
	if s.bad != nil {
		return
	}
	s.events++
	s.newline = strings.HasSuffix(string(raw), "\n")
	line := strings.TrimSuffix(string(raw), "\n")
	switch {
	case line == "":
		s.bad = fmt.Errorf("an empty line")
	case s.result != nil:
		s.bad = fmt.Errorf("a line after the result")
	}
	if s.bad != nil {
		return
	}
	m, kind, err := agentstream.Decode([]byte(line))
	if err == nil {
		err = s.sessionID(m)
	}
	if err != nil {
		s.bad = err
		return
	}
	ev := agentstream.DecodeClaude(m, kind)
	switch kind {
	case agentstream.ClaudeSystem:
		if ev.Subtype == agentstream.ClaudeInit {
			s.model = ev.Model
		}
		if ev.Subtype == agentstream.ClaudeAPIRetry {
			r := ev.Retry
			s.retrySeen = true
			retrying(s.text.sinks, "Claude", claudeRetry(r.Attempt, r.MaxRetries, r.Status, r.Error))
			if n := int(r.Status); isAuthStatus(n) && s.auth == 0 {
				s.auth = n
				s.stop()
			}
		}
	case agentstream.ClaudeStreamEvent:
		s.delta(ev.Delta)
	case agentstream.ClaudeAssistant:
		s.assistant(ev.Content)
	case agentstream.ClaudeUser:
		s.toolResults(ev.ToolResults)
	case agentstream.ClaudeResult:
		s.onResult(ev.Result)
	}
}

// sessionID checks the top-level session_id an event may carry.
func (s *claudeStream) sessionID(m agentstream.Fields) error {
	id, present, err := agentstream.SessionID(m)
	switch {
	case err != nil || !present:
		return err
	case !validSession(id):
		return fmt.Errorf("session_id must be 1..%d bytes without control characters", maxSessionBytes)
	case s.session == "":
		s.session = id
	case s.session != id:
		return fmt.Errorf("the session id changed")
	}
	return nil
}

// delta publishes a content delta: text as output, thinking as system.
func (s *claudeStream) delta(d agentstream.ClaudeDelta) {
	switch d.Kind {
	case agentstream.DeltaStop:
		s.text.flush()
		s.thinking.flush()
	case agentstream.DeltaText:
		s.textSeen = true
		s.text.add(d.Text)
	case agentstream.DeltaThinking:
		s.thinking.add(d.Text)
	}
}

// assistant handles a whole assistant message: its text blocks are output
// only when no text delta came, and each tool call is a system line.
func (s *claudeStream) assistant(content []agentstream.ClaudeBlock) {
	s.text.flush()
	s.thinking.flush()
	for _, b := range content {
		switch b.Type {
		case "text":
			if !s.textSeen {
				emitLines(s.text.sinks, streamOutput, b.Text)
			}
		case "tool_use":
			emit(s.text.sinks, streamSystem, "tool "+b.Name+" "+truncateUTF8(string(b.Input), 200))
			s.tools.start(b.ID, b.Name, claudeToolType(b.Name))
		}
	}
}

// onResult records the result event.
func (s *claudeStream) onResult(r agentstream.ClaudeOutcome) {
	s.text.flush()
	s.thinking.flush()
	if u, ok := r.Tokens(); ok {
		s.usage = Usage(u)
	}
	if n := int(r.APIStatus); isAuthStatus(n) && s.auth == 0 {
		s.auth = n
	}
	if r.Failed() {
		diag := agentstream.Str(r.Answer)
		if diag == "" {
			diag = r.ErrorText()
		}
		if diag == "" {
			diag = "Claude result " + r.Subtype
		}
		s.result = &claudeResult{diag: diag}
		return
	}
	answer, ok := agentstream.StrOK(r.Answer)
	if !ok {
		s.bad = fmt.Errorf("a successful result is not a string")
		return
	}
	s.result = &claudeResult{ok: true, answer: answer}
}

// end judges the process: a successful result with exit status 0 is the
// answer; a failing result is the provider's failure, retryable only after
// an API retry; no result is retryable after an API retry and a driver
// failure otherwise.
func (s *claudeStream) end(res worker.ProcessResult) attempt {
	s.text.flush()
	s.thinking.flush()
	a := attempt{session: s.session, problem: broken(res, s.bad), usage: s.usage}
	switch {
	case s.auth != 0 && (s.result == nil || !s.result.ok):
		a.auth, a.problem = s.auth, fmt.Sprintf("the provider answered HTTP %d", s.auth)
		if s.result != nil {
			a.problem += ": " + s.result.diag
		}
	case a.problem != "":
	case s.events > 0 && !s.newline:
		a.problem = "malformed event stream: it does not end with a newline"
	case s.result == nil && s.retrySeen:
		a.problem, a.retryable = "the stream ended without a result after an API retry", true
	case s.result == nil:
		a.problem = unfinished("a result", res)
	case !s.result.ok:
		a.problem, a.retryable = s.result.diag, s.retrySeen
	case res.Exit != nil:
		a.problem = processProblem(res)
	default:
		a.ok = true
		a.reply = Reply{Session: s.session, Text: s.result.answer, Streamed: true, Model: s.model}
	}
	return a
}
