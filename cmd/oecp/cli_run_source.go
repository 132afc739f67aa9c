package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/runs"
)

// sourceSyntax is how --source is written.
const sourceSyntax = "OWNER/NAME@BRANCH:REVISION"

var (
	repoRE     = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}/[A-Za-z0-9._-]{1,100}$`)
	revisionRE = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// parseSource reads --source OWNER/NAME@BRANCH:REVISION: the repository
// is everything before the first '@' (owner and name never hold one), the
// revision everything after the last ':' (a branch never holds one), and
// the branch what lies between. The revision is the full 40-hex commit id.
func parseSource(s string) (client.RunSource, error) {
	repo, rest, ok := strings.Cut(s, "@")
	i := strings.LastIndex(rest, ":")
	if !ok || i < 0 {
		return client.RunSource{}, fmt.Errorf("--source %q: want %s, e.g. acme/widgets@main:<40 hex digits>", s, sourceSyntax)
	}
	src := client.RunSource{Repository: repo, Branch: rest[:i], Revision: rest[i+1:]}
	switch {
	case !repoRE.MatchString(src.Repository):
		return client.RunSource{}, fmt.Errorf("--source %q: the repository must be OWNER/NAME (each 1..100 of A-Z a-z 0-9 . _ -)", s)
	case src.Branch == "":
		return client.RunSource{}, fmt.Errorf("--source %q: the branch is empty", s)
	case !revisionRE.MatchString(src.Revision):
		return client.RunSource{}, fmt.Errorf("--source %q: the revision must be a full commit id (40 lowercase hex digits)", s)
	}
	return src, nil
}

func formatSource(s client.RunSource) string {
	return s.Repository + "@" + s.Branch + ":" + s.Revision
}

// gitSource snapshots the git checkout of the current directory: its
// origin remote as OWNER/NAME, the branch HEAD is attached to, and the
// exact commit of HEAD. It also returns the checkout's top directory.
// Uncommitted changes are not part of the snapshot. An error says why the
// current directory gives no source.
func gitSource() (client.RunSource, string, error) {
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", args...).Output()
		return strings.TrimSpace(string(out)), err
	}
	fail := func(format string, a ...any) (client.RunSource, string, error) {
		return client.RunSource{}, "", fmt.Errorf(format, a...)
	}
	top, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return fail("the current directory is not in a git checkout (or git is not installed)")
	}
	branch, err := git("symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil {
		return fail("HEAD of the git checkout %s is detached, not on a branch", top)
	}
	rev, err := git("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil {
		return fail("branch %s of the git checkout %s has no commit yet", branch, top)
	}
	url, err := git("remote", "get-url", "origin")
	if err != nil {
		return fail("the git checkout %s has no remote named origin", top)
	}
	repo, ok := repoFromURL(url)
	if !ok {
		return fail("the origin of the git checkout %s (%s) does not end in OWNER/NAME", top, url)
	}
	return client.RunSource{Repository: repo, Branch: branch, Revision: rev}, top, nil
}

// repoFromURL is OWNER/NAME of a remote URL: the last two components of
// its path, without a ".git" suffix. It reads scheme URLs
// (https://github.com/acme/widgets.git, ssh://git@host/acme/widgets) and
// scp-like ones (git@github.com:acme/widgets.git).
func repoFromURL(u string) (string, bool) {
	path := u
	if _, rest, ok := strings.Cut(u, "://"); ok {
		_, path, _ = strings.Cut(rest, "/") // drop the host
	} else if host, rest, ok := strings.Cut(u, ":"); ok && !strings.Contains(host, "/") {
		path = rest
	}
	path = strings.TrimSuffix(strings.TrimRight(path, "/"), ".git")
	parts := strings.Split(path, "/")
	if len(parts) < 2 {
		return "", false
	}
	repo := parts[len(parts)-2] + "/" + parts[len(parts)-1]
	return repo, repoRE.MatchString(repo)
}

// defaultTitle is a run's title when --title is absent: the graph file's
// name without its extension.
func defaultTitle(graphFile string) string {
	if graphFile == "-" {
		return "graph from stdin"
	}
	base := filepath.Base(graphFile)
	if t := strings.TrimSuffix(base, filepath.Ext(base)); t != "" {
		return t
	}
	return base
}

// submissionKey is the default submission key: "oecp-cli-" and 32 hex
// digits of the SHA-256 of the submission without its key, in the
// server's canonical encoding (so reformatting a file changes nothing),
// followed by the run id when one was given with --id. Submitting the same
// files, input, title and source again therefore answers the run already
// submitted instead of starting another; an explicit --id names a run of
// its own. A submission the server's decoder refuses is hashed as sent
// (the server then says what is wrong with it).
func submissionKey(sub client.RunSubmission, explicitID string) string {
	sub.SubmissionKey = "-"
	raw, err := json.Marshal(sub)
	if err != nil {
		return client.NewIdempotencyKey()
	}
	if d, err := runs.DecodeSubmission(raw); err == nil {
		d.SubmissionKey = ""
		if canon, err := d.Encode(); err == nil {
			raw = canon
		}
	}
	h := sha256.New()
	h.Write(raw)
	if explicitID != "" {
		h.Write([]byte{0})
		h.Write([]byte(explicitID))
	}
	return "oecp-cli-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// cursorSeq reads the sequence of a cursor of this server ("v2:N"), which
// orders a run's records; ok is false for any other cursor.
func cursorSeq(cursor string) (uint64, bool) {
	n, err := strconv.ParseUint(strings.TrimPrefix(cursor, "v2:"), 10, 64)
	return n, err == nil && strings.HasPrefix(cursor, "v2:")
}
