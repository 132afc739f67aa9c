// Package workspace gives each native run a git working copy of its source:
// the host's repository map (oecp serve --repos FILE), one bare mirror per
// repository whose objects every run's git directories borrow, a checkout
// of the run's exact revision on a branch of its own, the gate that lets a
// writer hold the workspace alone while verifiers share it, the host's git
// command runner (which delivery and workspace/checkpoint use too), the
// snapshots that record a workspace as a commit, and the removal of a
// finished run's directory after a retention period.
//
// A run's files are hostile input: everything in the work tree and in the
// agents' git directory is the agent's to choose (links, FIFOs, .git files,
// commondir, config, attributes, hooks, alternates, refs, reflogs). After
// the checkout the host runs git only in the mirrors and in the run's
// host.git, which no agent can reach and whose every file the host wrote;
// it reads the work tree itself (no link followed, files opened without
// following one, counted and sized before any is read) and hands git only
// what it read. It never runs git in the agents' git directory again, never
// follows a link there, and never copies what git printed into a tenant's
// records. A new work tree is given to the run's writer UID (PrepareFor)
// only before any agent has run in it, and before the host records it.
//
// Where finished runs are removed at once, runs are written apart: the
// runs' root and each tenant's directory carry the file system's hint
// that their subdirectories are unrelated, so a run's files are not
// placed among the inodes of the runs removed just before it.
package workspace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Defaults of a repository's forge settings.
const (
	DefaultForgeCLI  = "gh"
	DefaultForgeHost = "github.com"
)

var (
	repoRE    = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}/[A-Za-z0-9._-]{1,100}$`)
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	hostRE    = regexp.MustCompile(`^[A-Za-z0-9.-]+(:[0-9]+)?$`)
)

// ErrInvalidRepos wraps every problem of a repository file; ErrNotServed
// is a source repository the file does not list.
var (
	ErrInvalidRepos = errors.New("invalid repository file")
	ErrNotServed    = errors.New("repository is not served")
)

// Repo is one repository of the host's repository file.
type Repo struct {
	// URL is where the repository is fetched from and delivered to: any
	// URL git accepts, or a local path.
	URL string `json:"url"`
	// TokenEnv names the server environment variable holding the token
	// for fetches, push and forge calls ("" for none). It never reaches an
	// agent.
	TokenEnv string `json:"tokenEnv,omitempty"`
	// Forge configures the forge CLI of pull requests (default: gh on the
	// server's PATH, against github.com).
	Forge *Forge `json:"forge,omitempty"`
	// Tenants, when present, are the only tenants whose runs may use the
	// repository; absent, every tenant may.
	Tenants []string `json:"tenants,omitempty"`
}

// Forge is a repository's forge CLI: `<Argv…> api …` calls in the
// GitHub REST shape, with GH_HOST set to Host.
type Forge struct {
	Argv []string `json:"argv,omitempty"`
	Host string   `json:"host,omitempty"`
}

// ForgeCLI returns the repository's forge settings with defaults filled in.
func (r Repo) ForgeCLI() Forge {
	f := Forge{Argv: []string{DefaultForgeCLI}, Host: DefaultForgeHost}
	if r.Forge != nil {
		if len(r.Forge.Argv) > 0 {
			f.Argv = slices.Clone(r.Forge.Argv)
		}
		if r.Forge.Host != "" {
			f.Host = r.Forge.Host
		}
	}
	return f
}

// Token reads the repository's token from the server environment: "" and
// true without a TokenEnv; false when the variable is unset or empty.
func (r Repo) Token() (string, bool) {
	if r.TokenEnv == "" {
		return "", true
	}
	v := os.Getenv(r.TokenEnv)
	return v, v != ""
}

// Repos is the host's repository file: repositories keyed by owner/name.
type Repos struct {
	m map[string]Repo
}

// LoadRepos reads and validates a repository file.
func LoadRepos(path string) (*Repos, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		return ParseRepos(path, data)
	}
	return nil, fmt.Errorf("%w %s: %v", ErrInvalidRepos, path, err)
}

// ParseRepos validates a repository file's content: a JSON object whose
// keys are owner/name and whose values are closed Repo objects; name is
// the file name used in error messages.
func ParseRepos(name string, data []byte) (*Repos, error) {
	r := &Repos{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(&r.m)
	if err != nil || r.m == nil {
		return nil, fmt.Errorf(`%w %s: want a JSON object {"owner/name": {"url", "tokenEnv", "forge": {"argv", "host"}, "tenants"}}: %v`, ErrInvalidRepos, name, err)
	}
	for key, repo := range r.m {
		if !repoRE.MatchString(key) {
			err = fmt.Errorf("key %q is not owner/name", key)
		} else if err = repo.validate(); err != nil {
			err = fmt.Errorf("%s: %v", key, err)
		}
		if err != nil {
			return nil, fmt.Errorf("%w %s: %v", ErrInvalidRepos, name, err)
		}
	}
	return r, nil
}

func (r Repo) validate() error {
	switch {
	case strings.TrimSpace(r.URL) == "" || strings.HasPrefix(r.URL, "-"):
		return errors.New("url must be a git URL or a path")
	case r.TokenEnv != "" && !envNameRE.MatchString(r.TokenEnv):
		return fmt.Errorf("tokenEnv %q is not a variable name", r.TokenEnv)
	case r.Tenants != nil && (len(r.Tenants) == 0 || slices.Contains(r.Tenants, "")):
		return errors.New("tenants, when present, lists tenant names")
	case r.Forge == nil:
		return nil
	case r.Forge.Argv != nil && (len(r.Forge.Argv) == 0 || r.Forge.Argv[0] == ""):
		return errors.New("forge.argv needs at least the program")
	case r.Forge.Host != "" && !hostRE.MatchString(r.Forge.Host):
		return fmt.Errorf("forge.host %q is not a host name", r.Forge.Host)
	}
	return nil
}

// Lookup returns the settings of repository owner/name.
func (r *Repos) Lookup(repo string) (x Repo, ok bool) {
	if r != nil {
		x, ok = r.m[repo]
	}
	return x, ok
}

// Check refuses a repository the file does not list, or whose tenants
// list leaves tenant out, in the same words either way: a tenant learns
// neither whether the repository exists nor where the host's file is.
func (r *Repos) Check(tenant, repo string) error {
	if x, ok := r.Lookup(repo); !ok || (x.Tenants != nil && !slices.Contains(x.Tenants, tenant)) {
		return fmt.Errorf("%w: %s", ErrNotServed, repo)
	}
	return nil
}
