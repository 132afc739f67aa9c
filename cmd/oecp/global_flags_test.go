package main

import (
	"io"
	"slices"
	"testing"
)

// TestHoistGlobalFlags: connection flags before the command move to just
// after it (after the subcommand of run and template); any other flag
// there, or no command at all, is an error; args starting with the
// command are left alone.
func TestHoistGlobalFlags(t *testing.T) {
	for _, tc := range []struct {
		in, want []string
		err      bool
	}{
		{[]string{"apply", "-f", "g.json"}, []string{"apply", "-f", "g.json"}, false},
		{[]string{"--server", "ws://h/oecp", "apply", "-f", "g.json"}, []string{"apply", "--server", "ws://h/oecp", "-f", "g.json"}, false},
		{[]string{"--server=ws://h/oecp", "--json", "run", "list"}, []string{"run", "list", "--server=ws://h/oecp", "--json"}, false},
		{[]string{"--token-file", "t", "--allow-plaintext", "run", "submit", "--", "x"}, []string{"run", "submit", "--token-file", "t", "--allow-plaintext", "--", "x"}, false},
		{[]string{"--ca-file", "ca.pem", "template", "list"}, []string{"template", "list", "--ca-file", "ca.pem"}, false},
		{[]string{"--listen", ":1", "serve"}, nil, true},
		{[]string{"--server", "ws://h/oecp"}, nil, true},
		{[]string{"--server"}, nil, true},
	} {
		got, err := hoistGlobalFlags(newRoot(io.Discard, io.Discard), tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("hoistGlobalFlags(%q) = %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestCLIGlobalFlagsBeforeTheCommand: `oecp --server URL get` talks to
// that server (no OECP_SERVER is set), and a flag that cannot come first
// is a usage error that says which can.
func TestCLIGlobalFlagsBeforeTheCommand(t *testing.T) {
	srv := startServer(t)
	expect(t, oecp(t, nil, "--server", srv.url, "get"), 0, []string{"phase:"}, nil)
	expect(t, oecp(t, nil, "--server="+srv.url, "--json", "run", "list"), 0, []string{`{"runs":[]}`}, nil)
	expect(t, oecp(t, nil, "--idempotency-key", "k", "apply"), 2, nil, []string{"--idempotency-key cannot come before the command (only --server, "})
}
