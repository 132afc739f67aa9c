package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Forges whose issues --issue reads, each through its own CLI on the
// user's machine: GitHub with gh, GitLab with glab.
const (
	forgeGitHub = "github"
	forgeGitLab = "gitlab"
)

// Bounds of reading an issue.
const (
	// issueReadTimeout bounds the forge CLI's answer.
	issueReadTimeout = 2 * time.Minute
	// maxIssueAnswer bounds the forge CLI's output (an issue's body is at
	// most 64 KiB on GitHub; a task at most 32 KiB).
	maxIssueAnswer = 1 << 20
	// maxCLIErrorBytes bounds what the forge CLI's stderr contributes to
	// an error message.
	maxCLIErrorBytes = 600
)

// issueRefSyntax is how --issue is written.
const issueRefSyntax = "a number (123), OWNER/NAME#123, or the issue's URL (https://github.com/OWNER/NAME/issues/123, https://gitlab.example/GROUP/PROJECT/-/issues/123)"

var (
	issueNumberRE = regexp.MustCompile(`^#?([1-9][0-9]{0,17})$`)
	issueRepoRE   = regexp.MustCompile(`^([A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)+)#([1-9][0-9]{0,17})$`)
	githubPathRE  = regexp.MustCompile(`^/([A-Za-z0-9._-]+/[A-Za-z0-9._-]+)/issues/([1-9][0-9]{0,17})/?$`)
	gitlabPathRE  = regexp.MustCompile(`^/([A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)+?)(?:/-)?/issues/([1-9][0-9]{0,17})/?$`)
)

// issueRef is a parsed --issue: a number of the source's repository, a
// number of the repository repo, or an issue's URL (whose host and path
// say its forge and repository).
type issueRef struct {
	number string
	repo   string // OWNER/NAME or GROUP/…/PROJECT; "" for the source's repository
	url    string
	forge  string // forgeGitHub or forgeGitLab when url says which
}

// String names the issue in messages.
func (r issueRef) String() string {
	switch {
	case r.url != "":
		return r.url
	case r.repo != "":
		return r.repo + "#" + r.number
	}
	return "#" + r.number
}

// parseIssueRef reads --issue. A URL whose path has GitLab's "/-/issues/"
// or whose host names gitlab is a GitLab issue; another with
// /OWNER/NAME/issues/N is a GitHub one.
func parseIssueRef(s string) (issueRef, error) {
	s = strings.TrimSpace(s)
	if m := issueNumberRE.FindStringSubmatch(s); m != nil {
		return issueRef{number: m[1]}, nil
	}
	if m := issueRepoRE.FindStringSubmatch(s); m != nil {
		return issueRef{repo: m[1], number: m[2]}, nil
	}
	bad := fmt.Errorf("--issue %q: want %s", s, issueRefSyntax)
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return issueRef{}, bad
	}
	if u.Fragment != "" { // a link to a comment names the issue too
		u.Fragment = ""
	}
	gitlab := strings.Contains(u.Path, "/-/issues/") || strings.Contains(strings.ToLower(u.Hostname()), "gitlab")
	re, forge := githubPathRE, forgeGitHub
	if gitlab {
		re, forge = gitlabPathRE, forgeGitLab
	}
	m := re.FindStringSubmatch(u.Path)
	if m == nil {
		return issueRef{}, bad
	}
	return issueRef{repo: m[1], number: m[2], url: u.String(), forge: forge}, nil
}

// remote is where a git remote URL points: its host ("" for a local
// path) and its repository path without ".git".
type remote struct{ host, path string }

// parseRemote reads a remote URL: a scheme URL, an scp-like one
// (git@host:path) or a local path.
func parseRemote(u string) remote {
	var r remote
	if _, rest, ok := strings.Cut(u, "://"); ok {
		r.host, r.path, _ = strings.Cut(rest, "/")
	} else if host, rest, ok := strings.Cut(u, ":"); ok && !strings.Contains(host, "/") {
		r.host, r.path = host, rest
	} else {
		r.path = u
	}
	if _, h, ok := strings.Cut(r.host, "@"); ok {
		r.host = h
	}
	if h, _, ok := strings.Cut(r.host, ":"); ok {
		r.host = h
	}
	r.host = strings.ToLower(r.host)
	r.path = strings.TrimSuffix(strings.Trim(r.path, "/"), ".git")
	return r
}

// originRemote is the origin of the git checkout of the current
// directory, or the zero remote.
func originRemote() remote {
	out, err := exec.Command("git", "remote", "get-url", "origin").Output()
	if err != nil {
		return remote{}
	}
	return parseRemote(strings.TrimSpace(string(out)))
}

// issueForge chooses the forge CLI of an issue: the issue URL's forge,
// else flag (--forge), else gitlab when the origin's host names it, else
// github. A flag that contradicts the URL is an error.
func issueForge(ref issueRef, flag string, origin remote) (string, error) {
	switch {
	case flag != "" && flag != forgeGitHub && flag != forgeGitLab:
		return "", fmt.Errorf("--forge %q: want github or gitlab", flag)
	case ref.forge != "" && flag != "" && flag != ref.forge:
		return "", fmt.Errorf("--forge %s contradicts the issue's URL %s, a %s issue", flag, ref.url, ref.forge)
	case ref.forge != "":
		return ref.forge, nil
	case flag != "":
		return flag, nil
	case strings.Contains(origin.host, "gitlab"):
		return forgeGitLab, nil
	}
	return forgeGitHub, nil
}

// issueCommand is the forge CLI's command that prints the issue as JSON.
// A bare number is one of repo, the source's repository, on origin's
// host when the source is the checkout (origin.host "" otherwise).
func issueCommand(forge string, ref issueRef, repo string, origin remote) []string {
	target := ref.url
	if target == "" {
		target = ref.number
	}
	if forge == forgeGitLab {
		argv := []string{"glab", "issue", "view", target, "--output", "json"}
		if ref.url == "" {
			path := ref.repo
			if path == "" {
				path = repo
				if origin.host != "" && strings.HasSuffix(strings.ToLower(origin.path), "/"+strings.ToLower(repo)) {
					path = origin.path // the whole group path
				}
			}
			if origin.host != "" && origin.host != "gitlab.com" {
				path = "https://" + origin.host + "/" + path
			}
			argv = append(argv, "--repo", path)
		}
		return argv
	}
	argv := []string{"gh", "issue", "view", target, "--json", "number,title,body,url"}
	if ref.url == "" {
		name := ref.repo
		if name == "" {
			name = repo
		}
		if origin.host != "" && origin.host != "github.com" {
			name = origin.host + "/" + name
		}
		argv = append(argv, "--repo", name)
	}
	return argv
}

// issue is what the forge says of an issue.
type issue struct {
	number int64
	title  string
	body   string
	url    string
}

// task is the issue as a task: its title as a Markdown heading, then its
// body.
func (i issue) task() string {
	body := strings.TrimSpace(i.body)
	if body == "" {
		return "# " + i.title + "\n"
	}
	return "# " + i.title + "\n\n" + body + "\n"
}

// closes is the reference to the issue from a pull request into repo:
// "#N" for an issue of repo, else "PATH#N".
func (i issue) closes(ref issueRef, repo string) string {
	path := ref.repo
	if m := githubPathRE.FindStringSubmatch(urlPath(i.url)); m != nil && !strings.Contains(i.url, "/-/issues/") {
		path = m[1]
	} else if m := gitlabPathRE.FindStringSubmatch(urlPath(i.url)); m != nil {
		path = m[1]
	}
	n := strconv.FormatInt(i.number, 10)
	p, r := strings.ToLower(path), strings.ToLower(repo)
	if path == "" || p == r || strings.HasSuffix(p, "/"+r) {
		return "#" + n
	}
	return path + "#" + n
}

func urlPath(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Path
}

// errIssue is an issue the forge CLI could not read; hint says what to do.
type errIssue struct {
	msg, hint string
}

func (e *errIssue) Error() string { return e.msg }

// readIssue runs argv, the forge CLI's command of issueCommand, and
// decodes its answer. Every failure is an *errIssue naming the issue.
func readIssue(ctx context.Context, forge string, argv []string, ref issueRef) (issue, error) {
	ctx, cancel := context.WithTimeout(ctx, issueReadTimeout)
	defer cancel()
	cli, shown := argv[0], strings.Join(argv, " ")
	login := map[string]string{forgeGitHub: "gh auth login", forgeGitLab: "glab auth login"}[forge]
	cmd := exec.CommandContext(ctx, cli, argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &limited{w: &stdout, n: maxIssueAnswer}, &limited{w: &stderr, n: maxCLIErrorBytes}
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.Is(err, exec.ErrNotFound):
		site := map[string]string{forgeGitHub: "https://cli.github.com", forgeGitLab: "https://gitlab.com/gitlab-org/cli"}[forge]
		return issue{}, &errIssue{fmt.Sprintf("cannot read issue %s: %s, the %s CLI, is not installed (not on PATH)", ref, cli, forgeName(forge)),
			fmt.Sprintf("Install it (%s) and log in with `%s`, or give the task with --task TEXT|@FILE.", site, login)}
	case ctx.Err() != nil:
		return issue{}, &errIssue{fmt.Sprintf("cannot read issue %s: `%s` gave no answer within %s", ref, shown, issueReadTimeout), "Check your network and `" + login + "`."}
	case errors.As(err, &ee):
		said := strings.TrimSpace(stderr.String())
		if said == "" {
			said = ee.String()
		}
		return issue{}, &errIssue{fmt.Sprintf("cannot read issue %s: `%s` failed: %s", ref, shown, oneLine(said)), issueHint(said, login, ref)}
	case err != nil:
		return issue{}, &errIssue{fmt.Sprintf("cannot read issue %s: %s could not run: %v", ref, cli, err), "Check that `" + shown + "` works here."}
	}
	if stdout.Len() >= maxIssueAnswer {
		return issue{}, &errIssue{fmt.Sprintf("cannot read issue %s: %s answered more than %d bytes", ref, cli, maxIssueAnswer), "Give the task with --task @FILE instead."}
	}
	iss, err := decodeIssue(forge, stdout.Bytes())
	if err != nil {
		return issue{}, &errIssue{fmt.Sprintf("cannot read issue %s: `%s` answered %v", ref, shown, err), "Check that `" + shown + "` prints the issue, or give the task with --task."}
	}
	if iss.number == 0 {
		iss.number, _ = strconv.ParseInt(ref.number, 10, 64)
	}
	return iss, nil
}

// decodeIssue reads the forge CLI's JSON: gh's number, title, body and
// url; glab's (the GitLab API's) iid, title, description and web_url.
// Lines before the JSON object (notices some glab versions print) are
// skipped.
func decodeIssue(forge string, out []byte) (issue, error) {
	if i := bytes.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	var a struct {
		Number      int64   `json:"number"`
		IID         int64   `json:"iid"`
		Title       *string `json:"title"`
		Body        string  `json:"body"`
		Description string  `json:"description"`
		URL         string  `json:"url"`
		WebURL      string  `json:"web_url"`
	}
	if err := json.Unmarshal(out, &a); err != nil {
		return issue{}, fmt.Errorf("no issue JSON (%v)", err)
	}
	if a.Title == nil || strings.TrimSpace(*a.Title) == "" {
		return issue{}, errors.New("an issue without a title")
	}
	if forge == forgeGitLab {
		return issue{number: a.IID, title: strings.TrimSpace(*a.Title), body: a.Description, url: a.WebURL}, nil
	}
	return issue{number: a.Number, title: strings.TrimSpace(*a.Title), body: a.Body, url: a.URL}, nil
}

// issueHint says what to do after the forge CLI refused: log in, check
// the issue, or check the command.
func issueHint(said, login string, ref issueRef) string {
	l := strings.ToLower(said)
	switch {
	case strings.Contains(l, "auth login") || strings.Contains(l, "not logged") || strings.Contains(l, "401") || strings.Contains(l, "authenticat"):
		return fmt.Sprintf("Log in with `%s` (or set its token variable), then run this again.", login)
	case strings.Contains(l, "not found") || strings.Contains(l, "could not resolve") || strings.Contains(l, "404"):
		return fmt.Sprintf("Check that issue %s exists and that you can see it; a bare number is an issue of the source's repository.", ref)
	}
	return "Check that the command works here, or give the task with --task TEXT|@FILE."
}

func forgeName(forge string) string {
	if forge == forgeGitLab {
		return "GitLab"
	}
	return "GitHub"
}

// oneLine joins a program's message into one line of at most
// maxCLIErrorBytes.
func oneLine(s string) string {
	return shorten(strings.Join(strings.Fields(s), " "), maxCLIErrorBytes)
}

// limited writes at most n bytes to w and drops the rest, so a runaway
// program cannot fill memory; a caller sees the cut as a full buffer.
type limited struct {
	w interface{ Write([]byte) (int, error) }
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if l.n <= 0 {
		return len(p), nil
	}
	q := p
	if len(q) > l.n {
		q = q[:l.n]
	}
	l.n -= len(q)
	if _, err := l.w.Write(q); err != nil {
		return 0, err
	}
	return len(p), nil
}
