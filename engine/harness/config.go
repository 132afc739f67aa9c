// Package harness runs bound agent nodes through the run's harness (codex or
// claude). It holds the host's harness configuration (oecp serve --harness
// FILE) and the submit-time check of a runtime plan against it, the Driver
// port a harness implements (one turn in one session), the drivers (the
// Codex and Claude Code CLIs, and the generic command driver), the agent
// turn contract (prompt, mechanical validation, correction turns) and the
// Runner that turns one execution of an agent node into a worker.Outcome.
// Every agent process runs through engine/worker's process runner,
// confined by package sandbox when the host has one (Confine).
package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"time"
)

// Harness names a runtime plan may carry.
const (
	HarnessCodex  = "codex"
	HarnessClaude = "claude"
)

// Drivers of a harness entry: the harness's own CLI driver (named like the
// harness: "codex" or "claude") or the generic command driver.
const DriverCommand = "command"

// Session scopes of an agent binding. The empty string means ScopeExecution.
const (
	ScopeExecution    = "execution"
	ScopeNodeInstance = "node_instance"
)

// Limits of a harness entry.
const (
	maxArgvItems = 256
	maxArgvBytes = 64 << 10
	maxEnvNames  = 256
	maxEnvName   = 128
	// maxBaseURLBytes bounds a harness entry's baseUrl.
	maxBaseURLBytes = 2048
)

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Errors of the configuration and of the submit-time check. Check's errors
// wrap exactly one of ErrNotConfigured or ErrEnvNotAllowed.
var (
	ErrInvalidConfig = errors.New("invalid harness file")
	ErrNotConfigured = errors.New("harness not configured")
	ErrEnvNotAllowed = errors.New("environment variable not allowed by the harness")
)

// Entry is one harness of the host's harness file.
type Entry struct {
	// Driver is the harness's own name (its CLI driver, the default) or
	// "command".
	Driver string `json:"driver,omitempty"`
	// Argv is the program and its leading arguments, run once per turn;
	// the CLI drivers append theirs. The default of a CLI driver is the
	// harness name, found on the server's PATH; the command driver needs
	// one.
	Argv []string `json:"argv,omitempty"`
	// Env lists the server environment variables a binding may declare;
	// only their values ever reach the process, and only when declared.
	Env []string `json:"env,omitempty"`
	// BaseURL, when set, pins where the CLI sends its model requests (a
	// gateway or proxy): for codex the Responses API base including its
	// path (http://host:port/v1), for claude the Anthropic API root
	// (http://host:port). Empty: the CLI's own default.
	BaseURL string `json:"baseUrl,omitempty"`
}

// Config is the host's harness file: entries keyed by harness name. A nil
// *Config is valid and configures no harness.
type Config struct {
	file    string
	entries map[string]Entry
	// usage and maxUSD are the accounting of the runners it builds.
	usage  UsageObserver
	maxUSD float64
	// stall is the stall timeout of its CLI drivers (stall.go), when
	// stallSet; else DefaultStallTimeout.
	stall    time.Duration
	stallSet bool
}

// Load reads and validates a harness file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrInvalidConfig, path, err)
	}
	return Parse(path, data)
}

// Parse validates a harness file's content; name is the file name used in
// error messages. The file is a JSON object whose keys are harness names
// (codex, claude) and whose values are closed Entry objects.
func Parse(name string, data []byte) (*Config, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrInvalidConfig, name, fmt.Sprintf(format, args...))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return nil, bad("want a JSON object keyed by harness name (codex, claude)")
	}
	c := &Config{file: name, entries: map[string]Entry{}}
	for _, key := range sortedKeys(raw) {
		if key != HarnessCodex && key != HarnessClaude {
			return nil, bad("key %q: unknown harness (want codex or claude)", key)
		}
		var e Entry
		dec := json.NewDecoder(bytes.NewReader(raw[key]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, bad("key %q: want {\"driver\", \"argv\", \"env\", \"baseUrl\"}: %v", key, err)
		}
		if err := e.validate(key); err != nil {
			return nil, bad("key %q: %v", key, err)
		}
		c.entries[key] = e
	}
	return c, nil
}

// validate checks an entry of harness name and fills in its defaults.
func (e *Entry) validate(name string) error {
	switch e.Driver {
	case "":
		e.Driver = name
	case name, DriverCommand:
	default:
		return fmt.Errorf("driver %q: want %q or %q", e.Driver, name, DriverCommand)
	}
	if e.Argv == nil && e.Driver == name {
		e.Argv = []string{name}
	}
	if len(e.Argv) == 0 || e.Argv[0] == "" {
		return errors.New("argv needs at least the program")
	}
	size := 0
	for _, a := range e.Argv {
		size += len(a)
	}
	if len(e.Argv) > maxArgvItems || size > maxArgvBytes {
		return fmt.Errorf("argv exceeds %d items or %d bytes", maxArgvItems, maxArgvBytes)
	}
	if len(e.Env) > maxEnvNames {
		return fmt.Errorf("env lists more than %d names", maxEnvNames)
	}
	for _, n := range e.Env {
		if !validEnvName(n) {
			return fmt.Errorf("env %q is not a variable name", n)
		}
	}
	return validBaseURL(e.BaseURL)
}

// validBaseURL accepts "" or an absolute http(s) URL without credentials,
// query or fragment.
func validBaseURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || len(s) > maxBaseURLBytes {
		return fmt.Errorf("baseUrl %q: want an absolute http or https URL (at most %d bytes) without credentials, query or fragment", s, maxBaseURLBytes)
	}
	return nil
}

func validEnvName(n string) bool { return len(n) <= maxEnvName && envNameRE.MatchString(n) }

// Names lists the configured harnesses, sorted.
func (c *Config) Names() []string {
	if c == nil {
		return nil
	}
	return sortedKeys(c.entries)
}

// Kind is the driver of a configured harness: its own CLI (the harness
// name) or DriverCommand; "" when it is not configured.
func (c *Config) Kind(harness string) string {
	e, _ := c.entry(harness)
	return e.Driver
}

// Binding is the runtime-plan binding of one agent node.
type Binding struct {
	// Model is the provider model id, passed to the harness as is.
	Model string
	// Effort is the reasoning effort, or "" when the model takes none.
	Effort string
	// SessionScope is ScopeExecution (or "") or ScopeNodeInstance.
	SessionScope string
	// Env names the server environment variables the node's process gets.
	Env []string
}

// Check is the submit-time admission of a runtime plan: harness is the
// plan's harness name and agents its agent bindings by node name. It refuses
// a harness this server has not configured (the error names the --harness
// setting) and any declared environment name the harness entry does not
// list, so a tenant can never pull an arbitrary server variable into a
// process it controls. Nodes are checked in name order; the first problem
// is returned.
func (c *Config) Check(harness string, agents map[string]Binding) error {
	e, ok := c.entry(harness)
	if !ok {
		return c.notConfigured(harness)
	}
	allowed := map[string]bool{}
	for _, n := range e.Env {
		allowed[n] = true
	}
	for _, node := range sortedKeys(agents) {
		for _, n := range agents[node].Env {
			if !allowed[n] {
				return fmt.Errorf("%w: node %q declares env %q, which the server's --harness entry %q does not list (its operator must add it)", ErrEnvNotAllowed, node, n, harness)
			}
		}
	}
	return nil
}

func (c *Config) entry(harness string) (Entry, bool) {
	if c == nil {
		return Entry{}, false
	}
	e, ok := c.entries[harness]
	return e, ok
}

func (c *Config) notConfigured(harness string) error {
	if c == nil {
		return fmt.Errorf("%w: the plan uses harness %q but this server has none (its operator must start oecp serve with --harness FILE declaring %q)", ErrNotConfigured, harness, harness)
	}
	return fmt.Errorf("%w: the plan uses harness %q, which this server does not offer (its operator declares harnesses in the server's --harness file)", ErrNotConfigured, harness)
}

// File is the harness file's name, for the server's own log: refusals sent
// to clients never name it.
func (c *Config) File() string {
	if c == nil {
		return ""
	}
	return c.file
}

// Driver returns the driver of a configured harness; the error is Check's
// for an unconfigured one.
func (c *Config) Driver(harness string) (Driver, error) {
	e, ok := c.entry(harness)
	if !ok {
		return nil, c.notConfigured(harness)
	}
	switch e.Driver {
	case HarnessCodex:
		cl := newCLI(harness, e)
		cl.stall = c.stallTimeout()
		return &codexDriver{cli: cl}, nil
	case HarnessClaude:
		cl := newCLI(harness, e)
		cl.stall = c.stallTimeout()
		return &claudeDriver{cli: cl}, nil
	}
	return newCommandDriver(harness, e), nil
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// SetAccounting makes the runners this configuration builds report every
// agent turn's usage to obs (nil: none) and end an execution whose run's
// agents reported more than maxUSD of cost (0: no budget).
func (c *Config) SetAccounting(obs UsageObserver, maxUSD float64) {
	if c == nil {
		return
	}
	c.usage, c.maxUSD = obs, maxUSD
}

// Runner returns a runner over the driver of a configured harness, with
// the DefaultDeadline and the configuration's accounting.
func (c *Config) Runner(harness string) (*Runner, error) {
	d, err := c.Driver(harness)
	if err != nil {
		return nil, err
	}
	r := NewRunner(d, 0)
	r.harness, r.usage, r.budget.maxUSD = harness, c.usage, c.maxUSD
	return r, nil
}
