package workspace

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

// Git runs git commands on behalf of the host, never of an agent: with
// only LANG=C, PATH, HOME (Home) and settings that ignore system and user
// configuration and never prompt, hooks, fsmonitor and the untracked cache
// disabled, and the repository token, when there is one, as an HTTP
// authorization header passed in the environment (never on the command
// line, never written to a git config). Only commands that reach the
// remote get a Token: agents write the work tree, and nothing they wrote
// may run next to the token.
type Git struct {
	// Dir is the work tree the commands run in (-C); "" runs them in Home.
	Dir string
	// GitDir, when set, is the repository's git directory, given to git
	// explicitly with Dir as the work tree: the host's own, outside the
	// work tree, so a .git file or directory an agent wrote there is not
	// read.
	GitDir string
	// Home is the HOME of git, a directory agents cannot write.
	Home string
	// Token authenticates HTTP requests to Remote ("" for none): it is
	// sent to no other URL, whatever git is asked to reach.
	Token string
	// Remote is the URL the token belongs to.
	Remote string
	// Config holds settings (key=value) given to each command with -c,
	// after the host's own.
	Config []string
}

// ErrGit wraps every failed git command.
var ErrGit = errors.New("git failed")

// GitTimeout bounds one git command.
const GitTimeout = 10 * time.Minute

// maxGitStdout bounds what Run keeps of a git command's standard output
// (what an error keeps of its standard error: maxPipeStderr).
const maxGitStdout = 1 << 20

// Env is the environment of git and of the forge CLI: Token, when set,
// becomes an extra HTTP header for the URLs under Remote alone (none when
// Remote is not an http(s) URL).
func (g Git) Env() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{"LANG=C", "PATH=" + path, "HOME=" + g.Home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}
	// The operator's certificate authorities (a forge behind a private
	// CA) are the server's environment's.
	for _, k := range []string{"GIT_SSL_CAINFO", "SSL_CERT_FILE", "SSL_CERT_DIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	scope, ok := tokenScope(g.Remote)
	if !ok || g.Token == "" {
		return append(env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=credential.helper", "GIT_CONFIG_VALUE_0=")
	}
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + g.Token))
	return append(env, "GIT_CONFIG_COUNT=2",
		"GIT_CONFIG_KEY_0=credential.helper", "GIT_CONFIG_VALUE_0=",
		"GIT_CONFIG_KEY_1=http."+scope+".extraHeader", "GIT_CONFIG_VALUE_1=AUTHORIZATION: basic "+basic)
}

// Run runs `git <args>` and returns its stdout with surrounding space
// trimmed. A failure is ErrGit with the command (token-free: the token is
// only in the environment) and the last lines of stderr; ctx's end, or
// GitTimeout, kills it.
func (g Git) Run(ctx context.Context, args ...string) (string, error) {
	out, code, detail, err := g.run(ctx, args...)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit status %d: %s", code, detail)
	}
	if err != nil {
		return "", fmt.Errorf("%w: git %s: %v", ErrGit, stripUserinfo(strings.Join(args, " ")), stripUserinfo(err.Error()))
	}
	return out, nil
}

// Status runs `git <args>` and returns its exit status; only a command
// that could not run, or was killed, is an error.
func (g Git) Status(ctx context.Context, args ...string) (int, error) {
	_, code, _, err := g.run(ctx, args...)
	if err != nil {
		return 0, fmt.Errorf("%w: git %s: %v", ErrGit, stripUserinfo(strings.Join(args, " ")), stripUserinfo(err.Error()))
	}
	return code, nil
}

// argv is the command line of git up to its command: the settings that
// keep hooks, fsmonitor, the untracked cache, any attributes file and any
// user excludes file ($HOME/.config/git/ignore) off, Config, and the
// directories.
func (g Git) argv() []string {
	argv := []string{"git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=", "-c", "core.untrackedCache=false", "-c", "core.attributesFile=/dev/null",
		"-c", "core.excludesFile=/dev/null"}
	for _, c := range g.Config {
		argv = append(argv, "-c", c)
	}
	if g.Dir != "" {
		argv = append(argv, "-c", "safe.directory="+g.Dir, "-C", g.Dir)
	}
	if g.GitDir != "" {
		argv = append(argv, "-c", "safe.directory="+g.GitDir, "--git-dir="+g.GitDir)
		if g.Dir != "" {
			argv = append(argv, "--work-tree="+g.Dir)
		}
	}
	return argv
}

// run returns stdout (trimmed, at most maxGitStdout bytes), the exit
// status and the end of stderr of a git command that ran to its end.
func (g Git) run(ctx context.Context, args ...string) (string, int, string, error) {
	var out bytes.Buffer
	read := func(r io.Reader) error {
		if n, err := io.Copy(&out, io.LimitReader(r, maxGitStdout+1)); err != nil || n > maxGitStdout {
			return cmp.Or(err, errors.New("too much output"))
		}
		return nil
	}
	err := g.exec(ctx, nil, read, args...)
	var exit *exitError
	switch {
	case errors.As(err, &exit):
		return "", exit.code, exit.stderr, nil
	case err != nil:
		return "", 0, "", err
	}
	return strings.TrimSpace(out.String()), 0, "", nil
}

// userinfoRE matches the user and password of a URL (scheme://user:pw@).
var userinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]*@`)

// stripUserinfo removes the credentials of every URL in s, which git's
// errors carry into logs.
func stripUserinfo(s string) string { return userinfoRE.ReplaceAllString(s, "$1") }

// tokenScope is the URL prefix git's http.<url>.* settings match for a
// token of the remote at url: its scheme, host and path, without
// credentials, query or fragment. Only http and https remotes have one.
func tokenScope(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", false
	}
	u.User, u.RawQuery, u.Fragment, u.RawFragment = nil, "", "", ""
	return u.String(), true
}

// StripUserinfo removes the credentials of every URL in s.
func StripUserinfo(s string) string { return stripUserinfo(s) }
