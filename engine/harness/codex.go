package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/oecp/oecp/engine/harness/agentstream"
	"github.com/oecp/oecp/engine/worker"
)

// Codex provider settings.
const (
	openRouterURL      = "https://openrouter.ai/api/v1"
	providerOpenRouter = "openrouter"
	// maxThreadBytes bounds a Codex thread id.
	maxThreadBytes = 256
)

// codexForbidden are variables a Codex node must not declare: the driver
// owns CODEX_HOME, HOME and PATH, and a base URL would send the prompt and
// the key elsewhere.
var codexForbidden = []string{"CODEX_HOME", "HOME", "PATH", "TMPDIR", "CODEX_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_BASE"}

// codexDriver runs the Codex CLI: `codex exec --json … -` once per process,
// the prompt on stdin, in the turn's directory with a private CODEX_HOME
// and HOME. Writers may change the workspace (`--sandbox workspace-write`,
// network allowed), verifiers only read it (`--sandbox read-only`); no
// approval is ever asked for. It reads the JSONL event stream: assistant
// messages are output lines, every other item a one-line system summary,
// the thread id the session, the last assistant message the answer.
type codexDriver struct{ cli }

func (d *codexDriver) Turn(ctx context.Context, t Turn, sinks worker.Sinks) (Reply, error) {
	if err := d.checkEnv(t.Env); err != nil {
		return Reply{}, err
	}
	if t.Dir == "" || t.Home == "" {
		return Reply{}, driverErr(d.name, "no working directory or private home")
	}
	env, err := codexEnv(t)
	if err != nil {
		return Reply{}, driverErr(d.name, "%v", err)
	}
	base := t.ThreadUsage
	run := func(ctx context.Context, session, prompt string) attempt {
		pctx, stop := context.WithCancel(ctx)
		defer stop()
		s := &codexStream{sinks: sinks, thread: session, stop: stop, tools: newToolSpans(ctx)}
		defer s.tools.close()
		res, err := d.launch(pctx, t, codexArgs(t, session, d.baseURL), env, []byte(prompt), sinks, s.line)
		if err != nil {
			return launchFailed(err)
		}
		a := s.end(res)
		if s.usage != nil {
			if session == "" {
				base = Usage{}
			}
			a.usage, a.thread, base = s.usage.since(base), *s.usage, *s.usage
		}
		return a
	}
	// Codex continues once after any failure, its own or the process's.
	return withContinuation(ctx, d.name, "Codex", t, sinks, func(attempt) bool { return true }, run)
}

// codexEnv is the process environment: the declared variables, CODEX_HOME
// and HOME (the private home), TMPDIR (a directory inside it: Codex
// refuses to set up its sandbox helpers when its home lies under the
// temporary directory) and PATH. With the openai provider a
// declared OPENAI_API_KEY becomes CODEX_API_KEY (a declared CODEX_API_KEY
// wins) and one of the two is required; with openrouter OPENROUTER_API_KEY
// must be set and not empty.
func codexEnv(t Turn) ([]string, error) {
	env := declared(t.Env)
	for _, n := range codexForbidden {
		if _, ok := env[n]; ok {
			return nil, fmt.Errorf("a codex node may not declare %s", n)
		}
	}
	switch t.Provider {
	case providerOpenRouter:
		if env["OPENROUTER_API_KEY"] == "" {
			return nil, fmt.Errorf("the openrouter provider needs a declared, non-empty OPENROUTER_API_KEY")
		}
	default:
		if key, ok := env["OPENAI_API_KEY"]; ok {
			delete(env, "OPENAI_API_KEY")
			if _, own := env["CODEX_API_KEY"]; !own {
				env["CODEX_API_KEY"] = key
			}
		}
		if _, ok := env["CODEX_API_KEY"]; !ok {
			return nil, fmt.Errorf("the openai provider needs a declared OPENAI_API_KEY or CODEX_API_KEY")
		}
	}
	tmp, err := homeDir(t.Home, "tmp")
	if err != nil {
		return nil, fmt.Errorf("private temporary directory: %w", err)
	}
	env["CODEX_HOME"], env["HOME"], env["TMPDIR"], env["PATH"] = t.Home, t.Home, tmp, serverPath()
	return envList(env), nil
}

// homeDir makes the directory name inside home (mode 0700) and gives it
// home's owner: a sandboxed agent runs under the UID its home was given,
// and must be able to use what the driver adds there.
func homeDir(home, name string) (string, error) {
	dir := filepath.Join(home, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	st, err := os.Stat(home)
	if err != nil {
		return "", err
	}
	if own, ok := st.Sys().(*syscall.Stat_t); ok && int(own.Uid) != os.Geteuid() {
		if err := os.Lchown(dir, int(own.Uid), int(own.Gid)); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// codexArgs is the argv after the entry's: exec, the sandbox policy,
// resume when session is set, then every --config override (all after
// resume: on a resumed turn Codex 0.148 drops the overrides before
// `resume` once any follows it, and the provider, its base URL and network
// access fall back to the defaults), the JSON stream, the model, the
// thread and "-" (the prompt comes on stdin). baseURL, when set, is where the provider's Responses API is.
func codexArgs(t Turn, session, baseURL string) []string {
	conf := func(kv string) []string { return []string{"--config", kv} }
	a := []string{"exec"}
	if t.Verifier {
		a = append(a, "--sandbox", "read-only")
	} else {
		a = append(a, "--sandbox", "workspace-write")
	}
	if session != "" {
		a = append(a, "resume")
	}
	model := t.Model
	if t.Provider == providerOpenRouter {
		url := openRouterURL
		if baseURL != "" {
			url = baseURL
		}
		a = append(a, conf(`model_provider="openrouter"`)...)
		a = append(a, conf(`model_providers.openrouter.name="OpenRouter"`)...)
		a = append(a, conf(`model_providers.openrouter.base_url=`+tomlString(url))...)
		a = append(a, conf(`model_providers.openrouter.env_key="OPENROUTER_API_KEY"`)...)
		a = append(a, conf(`model_providers.openrouter.wire_api="responses"`)...)
		model = "openai/" + model
	} else {
		a = append(a, conf(`model_provider="openai"`)...)
		if baseURL != "" {
			a = append(a, conf(`openai_base_url=`+tomlString(baseURL))...)
		}
	}
	a = append(a, conf(`approval_policy="never"`)...)
	if !t.Verifier {
		a = append(a, conf(`sandbox_workspace_write.network_access=true`)...)
	}
	if t.Effort != "" {
		a = append(a, conf(`model_reasoning_effort="`+t.Effort+`"`)...)
	}
	a = append(a, conf(`web_search="disabled"`)...)
	a = append(a, "--json", "--model", model, "--skip-git-repo-check")
	if session != "" {
		a = append(a, session)
	}
	return append(a, "-")
}

// tomlString is s as a TOML basic string (JSON's escaping is valid TOML
// for the characters a URL holds).
func tomlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// codexStream folds one process's JSONL events. thread is the thread id
// (the one resumed, or the first one reported); bad is the first stream
// error.
type codexStream struct {
	sinks     worker.Sinks
	thread    string
	messages  []string
	completed bool
	failed    bool
	failure   string
	// lastError is the last top-level error event: Codex reports the
	// transport retries it recovers from that way, so it fails nothing by
	// itself and only explains a turn that ended without turn.completed.
	lastError string
	// auth is the 401/403 status an error named; stop ends the process
	// at once.
	auth  int
	stop  func()
	usage *Usage
	bad   error
	// tools are the open tool-call spans (trace.go).
	tools *toolSpans
}

func (s *codexStream) line(raw []byte) {
	line := strings.TrimSpace(string(raw))
	if s.bad != nil || line == "" {
		return
	}
	m, kind, err := agentstream.Decode([]byte(line))
	if err != nil {
		s.bad = err
		return
	}
	ev := agentstream.DecodeCodex(m, kind)
	switch kind {
	case agentstream.CodexThreadStarted:
		id := ev.ThreadID
		switch {
		case id == "" || len(id) > maxThreadBytes || !validSession(id):
			s.bad = fmt.Errorf("thread.started has no valid thread_id")
		case s.thread == "":
			s.thread = id
		case s.thread != id:
			s.bad = fmt.Errorf("the thread id changed")
		}
	case agentstream.CodexItemStarted, agentstream.CodexItemUpdated, agentstream.CodexItemCompleted:
		s.item(kind, ev.Item)
	case agentstream.CodexTurnStarted:
		emit(s.sinks, streamSystem, "turn started")
	case agentstream.CodexTurnCompleted:
		s.completed = true
		if u, ok := ev.Tokens(); ok { // cumulative over the thread
			s.usage = new(Usage(u))
		}
	case agentstream.CodexTurnFailed:
		s.fail(ev.Message)
	case agentstream.CodexError:
		s.onError(ev.Message)
	}
}

// onError handles a top-level error event: a system line, and the end of
// the process when it names a refused credential.
func (s *codexStream) onError(msg string) {
	if codexRetryRE.MatchString(msg) {
		retrying(s.sinks, "Codex", msg)
	} else {
		emit(s.sinks, streamSystem, "provider error: "+msg)
	}
	s.lastError = msg
	if n := authStatus(msg); n != 0 && s.auth == 0 {
		s.auth = n
		s.stop()
	}
}

func (s *codexStream) fail(msg string) {
	if msg == "" {
		msg = "the turn failed without a message"
	}
	if !s.failed {
		s.failed, s.failure = true, msg
	}
	if n := authStatus(msg); n != 0 && s.auth == 0 {
		s.auth = n
	}
}

// item handles one item event: a completed agent message is output and a
// candidate answer; any other item is a one-line system summary.
func (s *codexStream) item(event string, item agentstream.CodexItem) {
	if item.Type == "" {
		s.bad = fmt.Errorf("%s has no item type", event)
		return
	}
	if item.Type == agentstream.CodexErrorItem && codexRetryRE.MatchString(item.Message) {
		retrying(s.sinks, "Codex", item.Message)
		return
	}
	if item.Type == agentstream.CodexAgentMessage {
		if event == agentstream.CodexItemCompleted {
			s.messages = append(s.messages, item.Text)
			emitLines(s.sinks, streamOutput, item.Text)
		}
		return
	}
	emit(s.sinks, streamSystem, codexSummary(item))
	s.codexToolItem(event, item)
}

// codexSummary is one line about an item that is not an agent message.
func codexSummary(item agentstream.CodexItem) string {
	switch item.Type {
	case agentstream.CodexReasoning:
		return "reasoning: " + item.Text
	case agentstream.CodexCommand:
		line := "command: " + item.Command
		if item.Status != "" {
			line += " (" + item.Status
			if code := item.ExitCode; code != nil && string(code) != "null" {
				line += ", exit " + string(code)
			}
			line += ")"
		}
		return line
	case agentstream.CodexFileChange:
		changes := item.Changes()
		parts := make([]string, len(changes))
		for i, c := range changes {
			parts[i] = c.Kind + " " + c.Path
		}
		return "file change: " + strings.Join(parts, ", ")
	case agentstream.CodexMCPToolCall:
		line := "tool " + item.Server + "/" + item.Tool
		if item.Error != "" {
			line += ": error: " + item.Error
		}
		return line
	case agentstream.CodexWebSearch:
		return "web search: " + item.Query
	case agentstream.CodexTodoList:
		todo := item.Todos()
		parts := make([]string, len(todo))
		for i, x := range todo {
			mark := "[ ] "
			if x.Completed {
				mark = "[x] "
			}
			parts[i] = mark + x.Text
		}
		return "todo: " + strings.Join(parts, "; ")
	case agentstream.CodexErrorItem:
		return "error: " + item.Message
	}
	return item.Type
}

// end judges the process: a refused credential ends it first; else
// exactly one of completed and failed must hold; a failure is the
// provider's (accepted with any exit status); a completed turn needs an
// agent message and exit status 0, and its answer is the last message. A
// stream that ended without either is explained by its last error event.
func (s *codexStream) end(res worker.ProcessResult) attempt {
	a := attempt{session: s.thread, problem: broken(res, s.bad)}
	switch {
	case s.auth != 0 && !s.completed:
		a.auth = s.auth
		a.problem = s.failure
		if a.problem == "" {
			a.problem = s.lastError
		}
	case a.problem != "":
	case s.failed && s.completed:
		a.problem = "the stream reported both a failure and a completed turn"
	case s.failed:
		a.problem = s.failure
	case !s.completed:
		a.problem = unfinished("turn.completed", res)
		if s.lastError != "" {
			a.problem += "; last error: " + s.lastError
		}
	case len(s.messages) == 0:
		a.problem = "the turn completed without an agent message"
	case res.Exit != nil:
		a.problem = processProblem(res)
	default:
		a.ok = true
		a.reply = Reply{Session: s.thread, Text: s.messages[len(s.messages)-1], Streamed: true}
	}
	return a
}
