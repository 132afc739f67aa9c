package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/oecp/oecp/internal/agenttest"
	"github.com/oecp/oecp/internal/testkit"
)

// hostGitSetup is a hostile setup whose server serves repository acme/app
// (a bare remote the server's user owns, delivered through the example
// fake gh) and whose agent is hostile-git-agent.sh; victim is a directory
// of the server's user, hidden from agents, that no host program may read
// into a record or change.
type hostGitSetup struct {
	*hostileSetup
	remote, other, repos, victim string
	head, otherCommit            string
}

func newHostGitSetup(t *testing.T, uid int) *hostGitSetup {
	t.Helper()
	s := &hostGitSetup{hostileSetup: newHostileSetup(t, uid)}
	reposDir := filepath.Join(s.install, "repos")
	s.remote, s.other = filepath.Join(reposDir, "remote.git"), filepath.Join(reposDir, "other.git")
	s.repos, s.victim = filepath.Join(s.home, "repos.json"), filepath.Join(s.home, "victim")
	seed := func(bare, file, content string) string {
		work := t.TempDir()
		git(t, work, "-c", "init.defaultBranch=main", "init", "--quiet", "--bare", bare)
		git(t, work, "clone", "--quiet", bare, "w")
		if err := os.WriteFile(filepath.Join(work, "w", file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		git(t, filepath.Join(work, "w"), "add", file)
		git(t, filepath.Join(work, "w"), "commit", "--quiet", "-m", "seed")
		git(t, filepath.Join(work, "w"), "push", "--quiet", "origin", "HEAD:refs/heads/main")
		return git(t, filepath.Join(work, "w"), "rev-parse", "HEAD")
	}
	if err := os.MkdirAll(reposDir, 0o755); err != nil {
		t.Fatal(err)
	}
	s.head = seed(s.remote, "README.md", "# app\n")
	s.otherCommit = seed(s.other, "secret.txt", "another tenant's code\n")
	agent := []byte(testkit.ReadFile(t, "testdata/hostile-git-agent.sh"))
	gh := []byte(testkit.ReadFile(t, agenttest.FakeGH(t)))
	ghPath, agentPath := filepath.Join(s.install, "gh"), filepath.Join(s.install, "hostile-git-agent.sh")
	repos, _ := json.Marshal(map[string]any{
		"acme/app":   map[string]any{"url": s.remote, "forge": map[string]any{"argv": []string{ghPath, "--remote", s.remote}}},
		"acme/other": map[string]any{"url": s.other},
	})
	for path, body := range map[string][]byte{
		agentPath: agent, ghPath: gh, s.repos: repos,
		s.harness:                             fmt.Appendf(nil, `{"codex":{"driver":"command","argv":["/bin/bash",%q,%q,%q,%q,%q,%q]}}`, agentPath, s.install, s.data, s.harness, s.homeFile, s.secret),
		filepath.Join(s.victim, "attributes"): []byte("the server's own file\n"),
		filepath.Join(s.victim, "tokens"):     []byte("alice " + s.secret + "\n"),
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, body, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{reposDir, s.repos, s.victim, s.harness} {
		chownTree(t, d, uid)
	}
	if err := os.Chmod(s.victim, 0o700); err != nil {
		t.Fatal(err)
	}
	return s
}

// graph writes the hostile step then delivery as a graph and its runtime
// plan, and returns the graph's path.
func (s *hostGitSetup) graph(t *testing.T, mode string) string {
	t.Helper()
	example, err := os.ReadFile("../../examples/agents/review-loop.json")
	if err != nil {
		t.Fatal(err)
	}
	var ex struct {
		Policy json.RawMessage `json:"policy"`
		Root   struct {
			Children []struct {
				Branches []struct {
					Node struct {
						Children []json.RawMessage `json:"children"`
					} `json:"node"`
				} `json:"branches"`
			} `json:"children"`
		} `json:"root"`
	}
	if err := json.Unmarshal(example, &ex); err != nil {
		t.Fatal(err)
	}
	deliver := ex.Root.Children[1].Branches[0].Node.Children[0]
	g := `{"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},"policy":` + string(ex.Policy) + `,
"root":{"kind":"seq","name":"main","state":{"kind":"null"},"promotedStatePaths":[],"children":[
{"kind":"step","name":"work","worker":"agent.work@1","instructions":"MODE ` + mode + `","input":{"kind":"null"},"output":{"kind":"null"},
 "inputBindings":[],"writeBindings":[],"timeoutMs":600000,"attempts":1},
` + string(deliver) + `,
{"kind":"succeed","name":"done","output":{"kind":"null"},"bindings":[]}]}}`
	path := filepath.Join(s.install, "graph-"+mode+".json")
	rt := `{"harness":"codex","provider":"openai","size":"tiny","nodes":{"work":{"kind":"agent","model":"gpt-5.6"},"deliver":{"kind":"git_delivery"}}}`
	for p, body := range map[string]string{path: g, filepath.Join(s.install, "runtime-git.json"): rt} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// tree lists dir: each path, its type and content (nothing followed).
func tree(dir string) string {
	var lines []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			lines = append(lines, p+" "+err.Error())
			return nil
		}
		b, _ := os.ReadFile(p)
		lines = append(lines, p+" "+d.Type().String()+" "+string(b))
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestHostGitNeverStepsOnAgentState: a hostile agent on a server serving
// a repository, root and unprivileged, sandbox on, plants in its git
// directory and work tree everything that used to steer the host's git
// (commondir with filters, signing, fsmonitor, hooks and URL rewrites;
// alternates, reflogs, object and info directories as links to the
// server's files; refs, HEAD, shallow, FIFOs; attributes and modules; a
// nested .git naming another tenant's repository). The run's checkpoint
// and delivery run none of its programs, read, write and delete nothing of
// the server's, quote no host file in the run's log or export, push
// exactly the run's branch to the served repository (never the agent's),
// and never carry another repository's objects.
func TestHostGitNeverStepsOnAgentState(t *testing.T) {
	requireSandbox(t)
	for _, uid := range serverUIDs() {
		t.Run(fmt.Sprintf("uid-%d", uid), func(t *testing.T) {
			if uid != 0 {
				if err := canReadWrite("/dev/net/tun"); err != nil && os.Getenv("OECP_REQUIRE_SANDBOX") != "1" {
					t.Skipf("an unprivileged server has no network for agents: %v", err)
				}
			}
			s := newHostGitSetup(t, uid)
			srv := s.start(t, uid, "--repos", s.repos)
			before := tree(s.victim)
			rt := filepath.Join(s.install, "runtime-git.json")
			w := oecp(t, srv, "run", "submit", "-f", s.graph(t, "gitattack"), "--runtime", rt, "--source", "acme/app@main:"+s.head, "--id", "attack", "--watch")
			logs := oecp(t, srv, "run", "logs", "attack")
			if w.code != 0 || !strings.Contains(logs.stdout, "PROBE work planted attack") || !strings.Contains(logs.stdout, "PROBE work gitstatus ok") ||
				!strings.Contains(logs.stdout, "PROBE work mirror readonly") {
				t.Fatalf("the attack run: exit %d\n%s\n%s\nlogs:\n%s\nserver:\n%s", w.code, w.stdout, w.stderr, logs.stdout, s.log.String())
			}
			if after := tree(s.victim); after != before {
				t.Fatalf("the server's files changed (a program of the agent's ran, or git wrote through a link):\nbefore:\n%s\nafter:\n%s", before, after)
			}
			gitOut := func(dir string, args ...string) string {
				out, _ := exec.Command("git", append([]string{"-c", "safe.directory=*", "-C", dir}, args...)...).CombinedOutput()
				return strings.TrimSpace(string(out))
			}
			branches := strings.Fields(gitOut(s.remote, "for-each-ref", "--format=%(refname)", "refs/heads/oecp/"))
			if len(branches) != 1 {
				t.Fatalf("the remote's run branches: %v", branches)
			}
			head := gitOut(s.remote, "rev-parse", branches[0])
			if parent := gitOut(s.remote, "rev-parse", head+"^"); parent != s.head {
				t.Errorf("the delivered commit's parent is %s, want the source %s", parent, s.head)
			}
			files := gitOut(s.remote, "ls-tree", "-r", "--name-only", head)
			for _, f := range []string{"work.txt", "shadow", ".gitattributes"} {
				if !strings.Contains(files, f) {
					t.Errorf("the delivered tree lacks %s:\n%s", f, files)
				}
			}
			if strings.Contains(files, "stolen-by-host") {
				t.Errorf("a program of the agent's ran in the host's git work:\n%s", files)
			}
			if link := gitOut(s.remote, "cat-file", "-p", head+":shadow"); link != "/etc/shadow" {
				t.Errorf("the link is recorded as %q", link)
			}
			everything := gitOut(s.remote, "log", "-p", "--all")
			export := oecp(t, srv, "run", "export", "attack")
			for name, text := range map[string]string{"the branch": everything, "the run's log": logs.stdout, "the export": export.stdout + export.stderr} {
				for _, secret := range []string{s.secret, "a note only the server's user should read", shadowLine(t)} {
					if strings.Contains(text, secret) {
						t.Errorf("%s holds %q", name, secret)
					}
				}
			}
			evil, _ := filepath.Glob(filepath.Join(s.data, "runs", "*", "*", "runtime", "*", "evil", "evil.git"))
			evil2, _ := filepath.Glob(filepath.Join(s.data, "runs", "*", "*", "runtime", "evil", "evil.git"))
			for _, e := range append(evil, evil2...) {
				if refs := gitOut(e, "for-each-ref"); refs != "" {
					t.Errorf("the push reached the agent's repository %s: %s", e, refs)
				}
			}

			w = oecp(t, srv, "run", "submit", "-f", s.graph(t, "gitnested"), "--runtime", rt, "--source", "acme/app@main:"+s.head, "--id", "nested", "--watch")
			logs = oecp(t, srv, "run", "logs", "nested")
			// The graph does not route the delivery's failure: the run
			// goes on to its end, the delivery ended malformed.
			if !strings.Contains(w.stdout, `deliver ended (execution nested/deliver/1): failed (malformed`) || !strings.Contains(logs.stdout, `nested git repository at "vendor/lib"`) {
				t.Fatalf("the nested run: exit %d\n%s\n%s\nlogs:\n%s", w.code, w.stdout, w.stderr, logs.stdout)
			}
			if n := len(strings.Fields(gitOut(s.remote, "for-each-ref", "--format=%(refname)", "refs/heads/oecp/"))); n != 1 {
				t.Errorf("the nested run delivered a branch")
			}
			if out := gitOut(s.remote, "cat-file", "-t", s.otherCommit); out == "commit" {
				t.Errorf("another tenant's commit reached the repository")
			}
		})
	}
}

// shadowLine is the first line of /etc/shadow, which no record may hold
// ("" where the test cannot read it).
func shadowLine(t *testing.T) string {
	b, err := os.ReadFile("/etc/shadow")
	if err != nil {
		return "\x00unreadable"
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return line
}
