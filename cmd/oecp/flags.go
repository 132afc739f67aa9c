package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/oecp/oecp/capsule"
)

// Defaults of the client subcommands.
const (
	defaultServerURL = "ws://127.0.0.1:7300/oecp"
	// dialTimeout bounds opening one connection (TCP, TLS and upgrade).
	dialTimeout = 15 * time.Second
)

// cli is one client subcommand invocation: its flags, streams and the
// connection it opens.
type cli struct {
	name           string
	fs             *cmdFlags
	stdout, stderr io.Writer

	server         string
	serverFrom     string // where server came from (target_config.go); "" until resolved
	target         string // the current target's name, when serverFrom is serverFromTarget
	tokenFile      string
	autoServer     bool // the command may start the local server (local_server.go)
	noAutoServer   bool
	caFile         string
	allowPlaintext bool
	jsonOut        bool
	output         string // "" (text), json, yaml or wide; --json is -o json
	timestamps     bool   // prefix streamed lines with the local time
	historyEnd     uint64 // a run's last cursor when the command started: lines up to it are replayed
	// delivered is the delivery receipt of the run a watch followed (nil:
	// none), shown with how the run ended.
	delivered *capsule.Receipt
	// checkout is the git checkout a run's source was read from ("" for
	// --source), where its delivered branch is fetched.
	checkout string

	// Mutating commands only.
	idemKey      string
	ifGeneration optInt
	ifRun        optString
	runOnWire    bool // the method carries ifRunId; else --if-run is checked with get
	upsert       bool // the method's ifGeneration is optional (apply): not read with get

	args []string // positional arguments
}

// optInt is an int64 flag that knows whether it was given.
type optInt struct {
	set bool
	v   int64
}

func (o *optInt) String() string {
	if !o.set {
		return ""
	}
	return strconv.FormatInt(o.v, 10)
}

func (o *optInt) Type() string { return "value" }

func (o *optInt) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return fmt.Errorf("want a generation number (0 or more), got %q", s)
	}
	o.set, o.v = true, v
	return nil
}

type optString struct {
	set bool
	v   string
}

func (o *optString) String() string     { return o.v }
func (o *optString) Set(s string) error { o.set, o.v = true, s; return nil }
func (o *optString) Type() string       { return "value" }

const casHelp = "When --if-generation / --if-run are absent, the command first reads them with `get`: " +
	"convenient, not atomic (a change between the read and the request is not detected). " +
	"Pass them explicitly to pin the state you checked."

// localRunHelp explains --if-run on a method without a run precondition.
const localRunHelp = "--if-run is checked against `get` just before the request, not by the server (the method " +
	"carries no run precondition), so that check is not atomic either."

const keyHelp = "With --idempotency-key, the preconditions read for the key are remembered (in the user's cache " +
	"directory, 30 days), so the same command with the same key sends the same request and gets the first " +
	"call's receipt back, even after that call changed the cluster: retrying after an ambiguous failure is safe."

// exitStatusHelp is the exit status paragraph of the client commands.
const exitStatusHelp = `Exit status: 0 success; 1 the server refused the request, or the run failed or stopped;
2 usage error, unreadable file, refused URL, connection or authentication failure;
3 (watch, apply --watch) the run is held on a failed step; 130 interrupted (Ctrl-C).`

// newCLI prepares a subcommand. mutating adds --idempotency-key,
// --if-generation and --if-run; runOnWire says the method carries ifRunId.
func newCLI(name, synopsis, about string, stdout, stderr io.Writer, mutating, runOnWire bool) *cli {
	c := &cli{name: name, stdout: stdout, stderr: stderr, runOnWire: runOnWire}
	c.fs = newFlags(name, synopsis, about)
	c.fs.StringVar(&c.server, "server", "", "server `URL`, ws:// or wss:// (default: env OECP_SERVER, else the current target, else "+defaultServerURL+")")
	c.fs.StringVar(&c.tokenFile, "token-file", "", "`FILE` holding the bearer token (default: the current target's, else env OECP_TOKEN)")
	c.fs.StringVar(&c.caFile, "ca-file", "", "PEM `FILE` of extra CA certificates to trust for wss://")
	c.fs.BoolVar(&c.allowPlaintext, "allow-plaintext", false, "allow ws:// to a non-loopback host (traffic and token in clear)")
	c.fs.BoolVar(&c.jsonOut, "json", false, "print the method's JSON result instead of text")
	if strings.HasPrefix(name, "run ") || name == "apply" || name == "plan" {
		c.addAutoServer()
	}
	if mutating {
		c.fs.StringVar(&c.idemKey, "idempotency-key", "", "idempotency `KEY` of the request (default: a fresh random key)")
		c.fs.Var(&c.ifGeneration, "if-generation", "expected cluster generation `N` (default: read with get first)")
		if runOnWire {
			c.fs.Var(&c.ifRun, "if-run", "expected current run `ID` (default: read with get first)")
			c.fs.note(casHelp)
		} else {
			c.fs.Var(&c.ifRun, "if-run", "expected current run `ID`, checked with get just before the request (not atomic)")
			c.fs.note(casHelp + "\n" + localRunHelp)
		}
		c.fs.note(keyHelp)
	}
	c.fs.note(exitStatusHelp)
	return c
}

// addOutput adds -o (kubectl's convention) to a command that prints
// something besides JSON.
func (c *cli) addOutput() {
	c.fs.StringVar(&c.output, "o", "", "output `FORMAT`: json, yaml or wide (default: text)")
	_ = c.fs.cmd.RegisterFlagCompletionFunc("o", completeOutput)
}

// addTimestamps adds --timestamps to a command that streams lines.
func (c *cli) addTimestamps() {
	c.fs.BoolVar(&c.timestamps, "timestamps", true, "prefix each line with the local time it arrived (--timestamps=false drops it)")
}

// machine reports whether the command prints the method's JSON (as JSON
// or YAML) instead of text.
func (c *cli) machine() bool { return c.output == "json" || c.output == "yaml" }

// printRaw prints a method's JSON result, or a notification, as -o asks.
func (c *cli) printRaw(raw json.RawMessage) {
	if c.output == "yaml" {
		c.printYAML(raw)
		return
	}
	c.printJSON(raw)
}

// parse checks the positional arguments (cobra parsed the flags, in any
// order with them) and the output flags. A non-nil error ends the command.
func (c *cli) parse(args []string, minPos, maxPos int) error {
	c.args = args
	if c.jsonOut {
		if c.output != "" && c.output != "json" {
			return c.fs.usageErr("--json is -o json: it does not go with -o %s", c.output)
		}
		c.output = "json"
	}
	switch c.output {
	case "", "json", "yaml", "wide":
	default:
		return c.fs.usageErr("-o %q: want json, yaml or wide", c.output)
	}
	if len(c.args) > maxPos {
		return c.fs.usageErr("unexpected argument %q", c.args[maxPos])
	}
	if len(c.args) < minPos {
		return c.fs.usageErr("missing argument")
	}
	return nil
}

// flagGiven reports whether the flag name was set on the command line.
func flagGiven(fs *cmdFlags, name string) bool { return fs.Changed(name) }
