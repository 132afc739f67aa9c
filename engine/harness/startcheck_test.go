package harness_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oecp/oecp/engine/harness"
)

// TestCheckProgramsUnconfined: without a sandbox, a program that is not
// on PATH, one that does not exist, one that is not executable and a
// script whose interpreter is missing each fail the check, named with
// why; a command program whose --version exits non-zero (it ran) passes,
// and so does a CLI, with a WARN when its --version exits non-zero.
func TestCheckProgramsUnconfined(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noInterp := write("no-interp", "#!/nonexistent/interp\n", 0o755)
	plain := write("plain", "echo hi\n", 0o644)
	fails := write("fails", "#!/bin/sh\necho 'unknown option' >&2\nexit 3\n", 0o755)
	cli := write("codex", "#!/bin/sh\necho codex-cli 1.0\n", 0o755)
	oldCLI := write("claude", "#!/bin/sh\necho 'error: unknown option --version' >&2\nexit 1\n", 0o755)
	for _, tc := range []struct {
		file string
		want []string // nil: the check passes
		warn string   // a WARN the check logs ("": none)
	}{
		{`{"codex":{"argv":["oecp-no-such-program"]}}`, []string{`harness codex: program "oecp-no-such-program" is not on the server's PATH`}, ""},
		{`{"codex":{"argv":["/nonexistent/codex"]},"claude":{"driver":"command","argv":["` + plain + `"]}}`,
			[]string{`harness codex: program "/nonexistent/codex" does not exist`, `harness claude: program "` + plain + `" is not executable by the server`}, ""},
		{`{"codex":{"driver":"command","argv":["` + noInterp + `"]}}`, []string{`harness codex: program "` + noInterp + `" cannot be started: `}, ""},
		{`{"codex":{"argv":["` + cli + `"]},"claude":{"driver":"command","argv":["` + fails + `"]}}`, nil, ""},
		{`{"claude":{"argv":["` + oldCLI + `"]}}`, nil, "it ran, but --version exited 1: error: unknown option --version"},
	} {
		c, err := harness.Parse("harness.json", []byte(tc.file))
		if err != nil {
			t.Fatal(err)
		}
		var logs strings.Builder
		err = c.CheckPrograms(context.Background(), nil, t.TempDir(), slog.New(slog.NewTextHandler(&logs, nil)))
		if got := logs.String(); (tc.warn == "") != !strings.Contains(got, "level=WARN") || !strings.Contains(got, tc.warn) {
			t.Errorf("%s: logged %q, want a WARN with %q", tc.file, got, tc.warn)
		}
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.file, err)
			}
			continue
		}
		if !errors.Is(err, harness.ErrProgram) {
			t.Errorf("%s: %v, want ErrProgram", tc.file, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nlacks %q", tc.file, err, w)
			}
		}
	}
}
