package delivery_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oecp/oecp/delivery"
	"github.com/oecp/oecp/internal/agenttest"
	"github.com/oecp/oecp/internal/gittest"
	"github.com/oecp/oecp/workspace"
)

// gitHTTP is a smart-HTTP git server on loopback (git http-backend)
// serving the repositories under root, recording each request's path and
// Authorization header.
type gitHTTP struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string
}

func newGitHTTP(t *testing.T, root string) *gitHTTP {
	t.Helper()
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("no git http-backend: %v", err)
	}
	g := &gitHTTP{}
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + t.TempDir()}}
	g.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.seen = append(g.seen, r.URL.Path+" auth="+r.Header.Get("Authorization"))
		g.mu.Unlock()
		// The backend takes pushes from an authenticated user only.
		r.Header.Set("Remote-User", "test")
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// trust makes git trust the servers' certificates.
func trust(t *testing.T, servers ...*gitHTTP) {
	t.Helper()
	var pem []byte
	for _, s := range servers {
		pem = append(pem, certPEM(s.srv.Certificate().Raw)...)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_SSL_CAINFO", file)
}

func certPEM(der []byte) []byte {
	return pemEncode("CERTIFICATE", der)
}

func (g *gitHTTP) requests() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.seen...)
}

// TestPushReachesOnlyTheRunsRepository: an agent that rewrites the git
// configuration within its reach (its git directory's config, a commondir
// naming a configuration of its own, URL rewrites to a server of its
// choosing) does not move delivery's push: the push reaches the --repos
// URL over HTTP, which alone receives the token, exactly the run's branch
// is updated, and the run's log names where git pushed.
func TestPushReachesOnlyTheRunsRepository(t *testing.T) {
	t.Setenv("DELIVERY_TEST_TOKEN", "ghp_example")
	remote := gittest.NewRemote(t)
	remote.Git(remote.Dir, "config", "http.receivepack", "true")
	real := newGitHTTP(t, filepath.Dir(remote.Dir))
	evilRoot := t.TempDir()
	remote.Git(evilRoot, "init", "--quiet", "--bare", filepath.Join(evilRoot, "evil.git"))
	remote.Git(filepath.Join(evilRoot, "evil.git"), "config", "http.receivepack", "true")
	evil := newGitHTTP(t, evilRoot)
	trust(t, real, evil)
	url := real.srv.URL + "/remote.git"
	evilURL := evil.srv.URL + "/evil.git"

	gh := agenttest.FakeGH(t)
	repo := workspace.Repo{URL: url, TokenEnv: "DELIVERY_TEST_TOKEN", Forge: &workspace.Forge{Argv: []string{gh, "--remote", remote.Dir}}}
	m := workspace.NewManager(t.TempDir(), repos(t, repo), time.Hour, nil)
	t.Cleanup(m.Close)
	src := workspace.Source{Repository: "acme/app", Branch: "main", Revision: remote.Head()}
	key, branch := workspace.Key("tenant", "run-1"), workspace.Branch("tenant", "run-1")
	if err := m.Prepare(context.Background(), key, src, branch); err != nil {
		t.Fatal(err)
	}
	paths, _ := m.Paths(key)
	// The agent's doing: its git directory's configuration, and a
	// commondir naming another, each sending the repository elsewhere.
	rewrite := "[url \"" + evilURL + "\"]\n\tinsteadOf = " + url + "\n\tpushInsteadOf = " + url + "\n[remote \"origin\"]\n\turl = " + evilURL + "\n\tpushurl = " + evilURL + "\n"
	other := t.TempDir()
	for path, body := range map[string]string{
		filepath.Join(paths.Git, "config"):        rewrite,
		filepath.Join(other, "config"):            rewrite,
		filepath.Join(paths.Git, "commondir"):     other + "\n",
		filepath.Join(paths.Workspace, "new.txt"): "the agent's work\n",
	} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := &rig{t: t, remote: remote, job: delivery.Job{RunID: "run-1", Mode: delivery.ModePR, Source: src, Repo: repo, Branch: branch, Paths: paths, Key: key, Records: m}}
	got := r.deliver(delivery.Deliverer{})
	if !strings.Contains(got, `"delivery":"opened"`) {
		t.Fatalf("outcome %s\n%s", got, r.text())
	}
	if evil := evil.requests(); len(evil) != 0 {
		t.Fatalf("the agent's server was reached: %v", evil)
	}
	want := "auth=basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:ghp_example"))
	pushed := false
	for _, req := range real.requests() {
		if !strings.HasSuffix(strings.ToLower(req), strings.ToLower(want)) {
			t.Errorf("a request to the repository without its token: %s", req)
		}
		pushed = pushed || strings.Contains(req, "git-receive-pack")
	}
	if !pushed {
		t.Fatalf("no push reached the repository: %v", real.requests())
	}
	head := remote.Ref("refs/heads/" + branch)
	if content, ok := remote.Show(head, "new.txt"); !ok || content != "the agent's work\n" {
		t.Fatalf("the branch holds %q", content)
	}
	if refs := remote.Git(remote.Dir, "for-each-ref", "--format=%(refname)"); refs != "refs/heads/main\nrefs/heads/"+branch {
		t.Fatalf("the remote's refs:\n%s", refs)
	}
	if !strings.Contains(r.text(), "(git reports "+url+")") {
		t.Fatalf("the log does not name where git pushed:\n%s", r.text())
	}
}

func repos(t *testing.T, repo workspace.Repo) *workspace.Repos {
	t.Helper()
	b := []byte(`{"acme/app":` + mustJSON(t, repo) + `}`)
	r, err := workspace.ParseRepos("repos.json", b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func pemEncode(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}
