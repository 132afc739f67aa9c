package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLICompletionScripts: oecp completion writes cobra's script for
// each of the four shells, and refuses another.
func TestCLICompletionScripts(t *testing.T) {
	for sh, want := range map[string]string{
		"bash":       "complete -o default -F __start_oecp oecp",
		"zsh":        "compdef _oecp oecp",
		"fish":       "complete -c oecp",
		"powershell": "Register-ArgumentCompleter -CommandName 'oecp'",
	} {
		expect(t, oecp(t, nil, "completion", sh), 0, []string{want, "__complete"}, nil)
	}
	expect(t, oecp(t, nil, "completion", "tcsh"), 2, nil, []string{"want bash, zsh, fish or powershell"})
}

// bashComplete sources the bash script and completes line (the words
// typed so far, the last one being completed) as bash does on TAB,
// returning the candidates. Without the bash-completion package, the one
// function of it the script needs is defined here.
func bashComplete(t *testing.T, srv *testServer, line ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	script := `
if [ -r /usr/share/bash-completion/bash_completion ]; then . /usr/share/bash-completion/bash_completion
else _get_comp_words_by_ref() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
fi
source <(oecp completion bash)
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
__start_oecp oecp "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null
printf '%s\n' "${COMPREPLY[@]}"
`
	cmd := exec.Command("bash", append([]string{"-c", script, "bash"}, line...)...)
	cmd.Env = append(cliEnv(srv), "PATH="+filepath.Dir(oecpBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash completion of %q: %v", line, err)
	}
	return strings.Fields(string(out))
}

// TestCLICompletionBash: the loaded bash script offers run's commands for
// `oecp run <TAB>`, the commands a prefix starts, the values of -o, and
// the run ids and nodes the server knows; with no server it offers
// nothing.
func TestCLICompletionBash(t *testing.T) {
	if got := strings.Join(bashComplete(t, nil, "oecp", "run", ""), " "); got != "attach export force harnesses list logs status submit watch" {
		t.Errorf("oecp run <TAB>: %q", got)
	}
	if got := strings.Join(bashComplete(t, nil, "oecp", "re"), " "); got != "resubmit retry" {
		t.Errorf("oecp re<TAB>: %q", got)
	}
	if got := strings.Join(bashComplete(t, nil, "oecp", "get", "-o", ""), " "); got != "json yaml wide" {
		t.Errorf("oecp get -o <TAB>: %q", got)
	}
	srv := exampleServer(t)
	submit := []string{"run", "submit", "-f", exampleGraph, "--runtime", exampleRuntime, "--input", exampleInput, "--source", testSource}
	expect(t, oecp(t, srv, append(submit, "--id", "comp-1", "--watch")...), 0, nil, nil)
	if got := bashComplete(t, srv, "oecp", "run", "status", ""); strings.Join(got, " ") != "comp-1" {
		t.Errorf("oecp run status <TAB>: %q", got)
	}
	got := strings.Join(bashComplete(t, srv, "oecp", "run", "logs", "comp-1", "--execution", ""), " ")
	for _, want := range []string{"draft", "review", "comp-1/draft/1", "comp-1/review/1"} {
		if !strings.Contains(got, want) {
			t.Errorf("oecp run logs comp-1 --execution <TAB>: %q lacks %q", got, want)
		}
	}
	if got := bashComplete(t, srv, "oecp", "run", "attach", "comp-1", "dr"); strings.Join(got, " ") != "draft" {
		t.Errorf("oecp run attach comp-1 dr<TAB>: %q", got)
	}
	// No server: quietly nothing (not files, not an error).
	dead := &testServer{url: "ws://127.0.0.1:1/oecp", cache: t.TempDir()}
	if got := bashComplete(t, dead, "oecp", "run", "status", ""); len(got) != 0 {
		t.Errorf("oecp run status <TAB> without a server: %q", got)
	}
}

// TestCLIDidYouMean: a mistyped command is a usage error that suggests
// the command it is near.
func TestCLIDidYouMean(t *testing.T) {
	expect(t, oecp(t, nil, "aply"), 2, nil, []string{`unknown command "aply"`, "Did you mean 'oecp apply'?", "Run 'oecp help'"})
	expect(t, oecp(t, nil, "run", "wach", "x"), 2, nil, []string{`unknown command "wach"`, "Did you mean 'oecp run watch'?"})
	expect(t, oecp(t, nil, "help", "gte"), 2, nil, []string{"Did you mean 'oecp get'?"})
}
