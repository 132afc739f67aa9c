package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/oecp/oecp/protocol"
)

// TestCLIHelpOnStdout: `oecp help CMD` and `oecp CMD --help` print the
// command's usage, with --flags as the docs write them, on stdout and
// exit 0; so do `oecp help` and `oecp --help` for the command list.
func TestCLIHelpOnStdout(t *testing.T) {
	for _, args := range [][]string{{"help", "get"}, {"get", "--help"}, {"get", "-h"}} {
		r := oecp(t, nil, args...)
		expect(t, r, 0, []string{"usage: oecp get", "  --server URL", "OECP_SERVER", "Exit status:"}, nil)
		if r.stderr != "" {
			t.Errorf("%v wrote to stderr: %s", args, r.stderr)
		}
	}
	expect(t, oecp(t, nil, "help", "stop"), 0, []string{"convenient, not atomic", "--if-generation N"}, nil)
	expect(t, oecp(t, nil, "help", "serve"), 0, []string{"usage: oecp serve [--listen ADDR | --stdio] [--store sqlite|memory|postgres] [--data DIR | --dsn URL] [--auth-tokens FILE | --auth-jwt FILE]",
		"PostgreSQL at --dsn", "  --listen ADDR", "Exit status:"}, nil)
	expect(t, oecp(t, nil, "help", "plan"), 0, []string{"  -f GRAPH"}, nil)
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		expect(t, oecp(t, nil, args...), 0, []string{"usage: oecp <command>", "  completion ", "oecp help <command>"}, nil)
	}
	// No command at all is a usage error: the list goes to stderr.
	expect(t, oecp(t, nil), 2, nil, []string{"usage: oecp <command>"})
	expect(t, oecp(t, nil, "help", "nope"), 2, nil, []string{`unknown command "nope"`})
}

// TestCLIBadFlagIsOneLine: a bad flag prints one line and the hint to the
// command's help, not the whole usage.
func TestCLIBadFlagIsOneLine(t *testing.T) {
	for _, args := range [][]string{{"get", "--bogus"}, {"serve", "--bogus"}, {"verify", "--bogus"}, {"watch", "--from"}} {
		r := oecp(t, nil, args...)
		want := "  See 'oecp help " + args[0] + "'.\n"
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if r.code != exitUsage || len(lines) != 2 || !strings.HasPrefix(lines[0], "oecp "+args[0]+": ") || lines[1]+"\n" != want {
			t.Errorf("%v: exit %d, stderr %q; want exit 2, one line and %q", args, r.code, r.stderr, want)
		}
		if r.stdout != "" {
			t.Errorf("%v wrote to stdout: %s", args, r.stdout)
		}
	}
}

// TestCLIVersion: `oecp --version` and `oecp version` print the version
// line; `oecp version --json` prints one JSON object.
func TestCLIVersion(t *testing.T) {
	want := "(protocol " + protocol.Version + ")\n"
	for _, args := range [][]string{{"--version"}, {"version"}} {
		expect(t, oecp(t, nil, args...), 0, []string{"oecp ", want}, nil)
	}
	r := oecp(t, nil, "version", "--json")
	var v struct{ Version, ProtocolVersion string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || v.Version == "" || v.ProtocolVersion != protocol.Version {
		t.Fatalf("version --json: %+v", r)
	}
}
