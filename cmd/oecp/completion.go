package main

import (
	"bytes"
	"fmt"
	"github.com/spf13/cobra"
	"io"
	"regexp"
	"strings"
)

// flagLine matches a flag's line in a command's usage ("  --server URL").
var flagLine = regexp.MustCompile(`(?m)^  (?:-h, )?(--?[a-z][a-z0-9-]*)`)

// commandFlags lists the flags of each command (help and completion take
// none), read from the command's own usage so that they never drift.
func commandFlags() map[string][]string {
	out := map[string][]string{}
	for _, n := range commandNames() {
		if n == "help" || n == "completion" {
			continue
		}
		var b bytes.Buffer
		_ = run([]string{n, "--help"}, &b, io.Discard)
		for _, m := range flagLine.FindAllStringSubmatch(b.String(), -1) {
			out[n] = append(out[n], m[1])
		}
	}
	return out
}

func completionCmd(stdout, stderr io.Writer) *cobra.Command {
	fs := newFlags("completion", "completion bash|zsh",
		`Prints a completion script for the shell: command names, then each command's flags,
then file names. Load it with
  source <(oecp completion bash)      # in ~/.bashrc
  source <(oecp completion zsh)       # in ~/.zshrc, after compinit`, stdout, stderr)
	return fs.run(func(args []string) error {
		if len(args) != 1 {
			return fs.usageErr("give the shell: bash or zsh")
		}
		var script func(io.Writer)
		switch args[0] {
		case "bash":
			script = bashCompletion
		case "zsh":
			script = zshCompletion
		default:
			return fs.usageErr("unsupported shell %q: want bash or zsh", args[0])
		}
		script(stdout)
		return nil
	})
}

// bashCompletion writes the bash script: at the first word the commands,
// then the command's flags for a word starting with "-", else files.
func bashCompletion(w io.Writer) {
	names := strings.Join(commandNames(), " ")
	fmt.Fprintf(w, `# bash completion for oecp: source <(oecp completion bash)
_oecp() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  if [[ $COMP_CWORD -eq 1 ]]; then
    COMPREPLY=($(compgen -W %q -- "$cur")); return
  fi
  local flags=""
  case ${COMP_WORDS[1]} in
    help) [[ $COMP_CWORD -eq 2 ]] && COMPREPLY=($(compgen -W %q -- "$cur")); return;;
    completion) COMPREPLY=($(compgen -W "bash zsh" -- "$cur")); return;;
`, names, names)
	flags := commandFlags()
	for _, n := range commandNames() {
		if f, ok := flags[n]; ok {
			fmt.Fprintf(w, "    %s) flags=%q;;\n", n, strings.Join(f, " "))
		}
	}
	fmt.Fprint(w, `  esac
  if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$flags" -- "$cur")); fi
}
complete -o default -F _oecp oecp
`)
}

// zshCompletion writes the zsh script, the same rules as bash's.
func zshCompletion(w io.Writer) {
	fmt.Fprint(w, "#compdef oecp\n# zsh completion for oecp: source <(oecp completion zsh) after compinit\n_oecp() {\n  local -a cmds flags\n  cmds=(\n")
	for _, n := range commandNames() {
		fmt.Fprintf(w, "    %q\n", n+":"+commands[n].summary)
	}
	fmt.Fprint(w, "  )\n  if (( CURRENT == 2 )); then _describe command cmds; return; fi\n  case ${words[2]} in\n")
	fmt.Fprint(w, "    help) (( CURRENT == 3 )) && _describe command cmds; return;;\n    completion) compadd bash zsh; return;;\n")
	flags := commandFlags()
	for _, n := range commandNames() {
		if f, ok := flags[n]; ok {
			fmt.Fprintf(w, "    %s) flags=(%s);;\n", n, strings.Join(f, " "))
		}
	}
	fmt.Fprint(w, "  esac\n  if [[ ${words[CURRENT]} == -* ]]; then compadd -- $flags; else _files; fi\n}\ncompdef _oecp oecp\n")
}
