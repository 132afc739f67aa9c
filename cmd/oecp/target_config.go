package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/oecp/oecp/client"
	"go.yaml.in/yaml/v3"
)

// Targets are named servers kept in the user's configuration file, as
// kubectl keeps contexts: a URL and, optionally, the file holding the
// bearer token (never the token itself). The current target is where a
// client command goes when neither --server nor OECP_SERVER says
// otherwise.

// configFileName is the client configuration file under the user's
// configuration directory.
const configFileName = "config.yaml"

var targetNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// clientConfig is the content of config.yaml.
type clientConfig struct {
	Current string             `yaml:"current-target,omitempty"`
	Targets map[string]*target `yaml:"targets,omitempty"`
}

// target is one named server.
type target struct {
	URL       string `yaml:"url" json:"url"`
	TokenFile string `yaml:"token-file,omitempty" json:"tokenFile,omitempty"`
}

// configPath is $XDG_CONFIG_HOME/oecp/config.yaml (an absolute
// XDG_CONFIG_HOME only), else ~/.config/oecp/config.yaml.
func configPath() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "oecp", configFileName), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no configuration directory: %w", err)
	}
	return filepath.Join(home, ".config", "oecp", configFileName), nil
}

// loadConfig reads the configuration file at path; a missing file is an
// empty configuration. Parsing is strict: an unknown key, a second
// document or a target without a valid url is an error naming the file
// (and the line, where YAML knows it).
func loadConfig(path string) (*clientConfig, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &clientConfig{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var cfg clientConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s is not a valid oecp configuration: %s", path, yamlProblem(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s is not a valid oecp configuration: it holds more than one YAML document", path)
	}
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("%s is not a valid oecp configuration: %w", path, err)
	}
	return &cfg, nil
}

var unknownFieldRE = regexp.MustCompile(`field (\S+) not found in type \S+`)
var wrongTypeRE = regexp.MustCompile(`cannot unmarshal (\S+)(?: \S+)? into \S+`)

// yamlProblem says what the YAML decoder found wrong, in the file's terms
// rather than the Go types': "line 4: unknown key token".
func yamlProblem(err error) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return strings.TrimPrefix(err.Error(), "yaml: ")
	}
	out := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		e = unknownFieldRE.ReplaceAllString(e, "unknown key $1")
		out[i] = wrongTypeRE.ReplaceAllString(e, "a value of the wrong kind ($1) here")
	}
	return strings.Join(out, "; ")
}

// check validates what YAML's types do not: names, URLs, the current
// target.
func (cfg *clientConfig) check() error {
	for _, name := range cfg.names() {
		t := cfg.Targets[name]
		switch {
		case !targetNameRE.MatchString(name):
			return fmt.Errorf("target name %q: want letters, digits, '.', '_' or '-' (at most 63, starting with a letter or digit)", name)
		case t == nil || t.URL == "":
			return fmt.Errorf("target %s has no url", name)
		}
		if err := checkTargetURL(t.URL); err != nil {
			return fmt.Errorf("target %s: %w", name, err)
		}
		if t.TokenFile != "" && !filepath.IsAbs(t.TokenFile) {
			return fmt.Errorf("target %s: token-file %q is not an absolute path", name, t.TokenFile)
		}
	}
	if cfg.Current != "" && cfg.Targets[cfg.Current] == nil {
		return fmt.Errorf("current-target %q is not among the targets (%s)", cfg.Current, cfg.known())
	}
	return nil
}

// checkTargetURL accepts a ws:// or wss:// URL the client could dial
// (plaintext to a non-loopback host needs --allow-plaintext then).
func checkTargetURL(u string) error {
	if _, err := client.CheckURL(u, true); err != nil {
		return fmt.Errorf("url %q: want ws:// or wss:// with a host and no credentials, query or fragment (e.g. %s)", u, defaultServerURL)
	}
	return nil
}

// names are the targets' names, sorted.
func (cfg *clientConfig) names() []string {
	names := make([]string, 0, len(cfg.Targets))
	for n := range cfg.Targets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// known lists the targets' names for an error message.
func (cfg *clientConfig) known() string {
	if len(cfg.Targets) == 0 {
		return "none is configured; add one with oecp target add NAME --url URL"
	}
	return "known: " + strings.Join(cfg.names(), ", ")
}

// lookup is the named target, or an error listing the known ones.
func (cfg *clientConfig) lookup(name string) (*target, error) {
	if t := cfg.Targets[name]; t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("no target named %q (%s)", name, cfg.known())
}

// save writes cfg to path atomically (a temporary file renamed over it),
// readable by the user alone.
func (cfg *clientConfig) save(path string) error {
	var b bytes.Buffer
	b.WriteString("# oecp client configuration: edit with `oecp target add|use|remove`.\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(yamlIndent)
	if err := enc.Encode(cfg); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("configuration directory: %w", err)
	}
	f, err := os.CreateTemp(dir, ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name()) // after a successful rename, nothing is there
	_, err = f.Write(b.Bytes())
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Where a client command's server came from, in order of precedence.
const (
	serverFromFlag    = "--server"
	serverFromEnv     = "OECP_SERVER"
	serverFromTarget  = "target"
	serverFromDefault = "default"
)

// resolveServer settles the command's server URL and token file: --server,
// else OECP_SERVER, else the current target of the configuration file,
// else the default address. --token-file overrides the target's token
// file; a target's token file applies only to that target's URL. It runs
// once, before anything dials.
func (c *cli) resolveServer() error {
	if c.serverFrom != "" {
		return nil
	}
	given := func(flag string) bool { return c.fs != nil && flagGiven(c.fs, flag) }
	switch {
	case given("server"), c.fs == nil && c.server != "": // a cli built with its server, not from flags

		c.serverFrom = serverFromFlag
		return nil
	case os.Getenv("OECP_SERVER") != "":
		c.server, c.serverFrom = os.Getenv("OECP_SERVER"), serverFromEnv
		return nil
	}
	cfg := &clientConfig{}
	if path, err := configPath(); err == nil {
		if cfg, err = loadConfig(path); err != nil {
			return &localError{err}
		}
	}
	if cfg.Current == "" {
		u, err := localServerURL()
		c.server, c.serverFrom = u, serverFromDefault
		if err != nil {
			return &localError{err}
		}
		return nil
	}
	t := cfg.Targets[cfg.Current]
	c.server, c.serverFrom, c.target = t.URL, serverFromTarget, cfg.Current
	if !given("token-file") && t.TokenFile != "" {
		c.tokenFile = t.TokenFile
	}
	return nil
}

// serverOrigin says where the command's server came from, for messages.
func (c *cli) serverOrigin() string {
	switch c.serverFrom {
	case serverFromTarget:
		return "target " + c.target
	case serverFromDefault:
		return "the default address"
	}
	return c.serverFrom
}

// isDefaultServer reports whether nothing chose the command's server: no
// flag, no environment, no target.
func (c *cli) isDefaultServer() bool { return c.serverFrom == serverFromDefault }

// sortedTargets are cfg's targets in name order with the current one
// marked, as target list shows them.
func (cfg *clientConfig) sortedTargets() []targetListing {
	out := []targetListing{}
	for _, n := range cfg.names() {
		t := cfg.Targets[n]
		out = append(out, targetListing{Name: n, URL: t.URL, TokenFile: t.TokenFile, Current: n == cfg.Current})
	}
	return slices.Clip(out)
}

// targetListing is one target as target list --json prints it.
type targetListing struct {
	Name      string `json:"name"`
	URL       string `json:"url"`
	TokenFile string `json:"tokenFile,omitempty"`
	Current   bool   `json:"current"`
}
