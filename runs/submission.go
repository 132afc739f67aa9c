package runs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
)

// Submission is a decoded RunSubmission: immutable and free of secrets
// (the runtime plan names environment variables, never their values).
type Submission struct {
	Title         string           `json:"title"`
	Graph         *graph.GraphSpec `json:"graph"`
	InitialInput  protocol.Value   `json:"initialInput"`
	Runtime       RuntimePlan      `json:"runtime"`
	Source        Source           `json:"source"`
	SubmissionKey string           `json:"submissionKey"`
}

// Source is the repository snapshot a run works on.
type Source struct {
	Repository string `json:"repository"`
	Branch     string `json:"branch"`
	Revision   string `json:"revision"`
}

// RuntimePlan binds every executable node to how it runs: the one harness
// of the run, its provider, the run's size and a binding per node.
type RuntimePlan struct {
	Harness  string             `json:"harness"`
	Provider string             `json:"provider"`
	Size     string             `json:"size"`
	Nodes    map[string]Binding `json:"nodes"`
}

// Binding is one node's runtime binding: an agent (model, effort, session
// scope) or git delivery, each with the environment names it may read.
type Binding struct {
	Kind         string   `json:"kind"`
	Model        string   `json:"model,omitempty"`
	Effort       string   `json:"effort,omitempty"`
	SessionScope string   `json:"sessionScope,omitempty"`
	Env          []string `json:"env,omitempty"`
}

// Harnesses, binding kinds, session scopes and run sizes.
const (
	HarnessCodex  = "codex"
	HarnessClaude = "claude"

	KindAgent         = "agent"
	KindGitDelivery   = "git_delivery"
	ScopeExecution    = "execution"
	ScopeNodeInstance = "node_instance"
)

// Closed value sets of the runtime plan.
var (
	providers = map[string][]string{
		HarnessCodex:  {"openai", "openrouter"},
		HarnessClaude: {"anthropic", "openrouter"},
	}
	runSizes = []string{"tiny", "small", "standard", "large"}
	efforts  = []string{"low", "medium", "high", "xhigh", "max"}
)

// Bounds of a submission's strings.
const (
	// maxModelBytes bounds an agent binding's model id.
	maxModelBytes = 128
	// maxEnvNameBytes bounds one declared environment name.
	maxEnvNameBytes = 128
	// MaxEnvNames bounds the declared environment names of one node and,
	// counted once each, of a whole run.
	MaxEnvNames = 64
	// maxRepoPartBytes and maxRepoBytes bound "owner/name".
	maxRepoPartBytes = 100
	maxRepoBytes     = 255
	// maxBranchBytes bounds the source branch.
	maxBranchBytes = 255
)

var (
	envNameRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	repoPartRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	revisionRE = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// errSchema marks a submission that breaks the wire schema (answered as
// SCHEMA_VIOLATION with the reason).
var errSchema = errors.New("submission does not match the schema")

func schemaf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errSchema, fmt.Sprintf(format, args...))
}

// closedObject splits raw into its members (last duplicate wins) and
// rejects any key not in allowed or a missing required one (named with a
// leading '!').
func closedObject(raw json.RawMessage, what string, fields ...string) (map[string]json.RawMessage, error) {
	ms, ok := protocol.ObjectMembers(raw)
	if !ok {
		return nil, schemaf("%s must be an object", what)
	}
	out := make(map[string]json.RawMessage, len(ms))
	for _, m := range ms {
		if !slices.Contains(fields, m.Key) && !slices.Contains(fields, "!"+m.Key) {
			return nil, schemaf("%s: unknown field %q", what, m.Key)
		}
		out[m.Key] = m.Value
	}
	for _, f := range fields {
		if name, req := strings.CutPrefix(f, "!"); req && out[name] == nil {
			return nil, schemaf("%s: missing field %q", what, name)
		}
	}
	return out, nil
}

// str decodes a JSON string member; absent is "" (callers check presence).
func str(m map[string]json.RawMessage, key, what string) (string, error) {
	raw, ok := m[key]
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", schemaf("%s.%s must be a string", what, key)
	}
	return s, nil
}

// closedStrings decodes a closed object whose members are the required
// strings of dst (by member name) plus the members named in more.
func closedStrings(raw json.RawMessage, what string, dst map[string]*string, more ...string) (map[string]json.RawMessage, error) {
	fields := slices.Clone(more)
	for name := range dst {
		fields = append(fields, "!"+name)
	}
	m, err := closedObject(raw, what, fields...)
	for name, p := range dst {
		if err == nil {
			*p, err = str(m, name, what)
		}
	}
	return m, err
}

// DecodeSubmission strictly decodes a RunSubmission: closed objects at
// every level, the schema's string bounds and closed value sets. It does
// not apply the admission rules (see Admit).
func DecodeSubmission(raw json.RawMessage) (*Submission, error) {
	s, _, err := decodeSubmission(raw, func(g json.RawMessage) (*graph.GraphSpec, error) { return graph.Decode(g) })
	return s, err
}

// decodeSubmission is DecodeSubmission with the graph decoded by
// decodeGraph; it also returns the graph's wire bytes.
func decodeSubmission(raw json.RawMessage, decodeGraph func(json.RawMessage) (*graph.GraphSpec, error)) (*Submission, json.RawMessage, error) {
	m, err := closedObject(raw, "submission", "!title", "!graph", "!initialInput", "!runtime", "!source", "!submissionKey")
	if err != nil {
		return nil, nil, err
	}
	s := &Submission{}
	if s.Title, err = str(m, "title", "submission"); err != nil {
		return nil, nil, err
	}
	if s.SubmissionKey, err = str(m, "submissionKey", "submission"); err != nil {
		return nil, nil, err
	}
	if !graph.IsBoundedString256(s.Title) || !graph.IsBoundedString256(s.SubmissionKey) {
		return nil, nil, schemaf("title and submissionKey must be 1..256 characters without control characters")
	}
	if s.Graph, err = decodeGraph(m["graph"]); err != nil {
		return nil, nil, schemaf("graph: %v", err)
	}
	if s.InitialInput, err = protocol.NormalizeValue(m["initialInput"]); err != nil {
		return nil, nil, schemaf("initialInput: %v", err)
	}
	if s.Runtime, err = decodeRuntime(m["runtime"]); err != nil {
		return nil, nil, err
	}
	if s.Source, err = decodeSource(m["source"]); err != nil {
		return nil, nil, err
	}
	return s, m["graph"], nil
}

func decodeSource(raw json.RawMessage) (Source, error) {
	var src Source
	if _, err := closedStrings(raw, "source", map[string]*string{"repository": &src.Repository, "branch": &src.Branch, "revision": &src.Revision}); err != nil {
		return Source{}, err
	}
	owner, name, ok := strings.Cut(src.Repository, "/")
	if !ok || len(src.Repository) > maxRepoBytes || len(owner) > maxRepoPartBytes || len(name) > maxRepoPartBytes ||
		!repoPartRE.MatchString(owner) || !repoPartRE.MatchString(name) {
		return Source{}, schemaf("source.repository must be owner/name (each 1..100 of [A-Za-z0-9._-])")
	}
	if !validBranch(src.Branch) {
		return Source{}, schemaf("source.branch is not a valid git branch name")
	}
	if !revisionRE.MatchString(src.Revision) {
		return Source{}, schemaf("source.revision must be 40 lowercase hex digits")
	}
	return src, nil
}

// validBranch applies git's ref-name rules to a branch name: 1..255
// bytes, no control characters, space or any of ~^:?*[\, no "..", "@{"
// or "//", no component starting with '.' or ending with ".lock", not
// starting with '-' or '/', not ending with '/' or '.', and not "@".
func validBranch(b string) bool {
	if b == "" || len(b) > maxBranchBytes || b == "@" || !utf8.ValidString(b) ||
		strings.ContainsAny(b, " ~^:?*[\\\x7f") || protocol.HasControl(b) ||
		strings.Contains(b, "..") || strings.Contains(b, "@{") || strings.Contains(b, "//") ||
		strings.HasPrefix(b, "-") || strings.HasPrefix(b, "/") || strings.HasSuffix(b, "/") || strings.HasSuffix(b, ".") {
		return false
	}
	for _, c := range strings.Split(b, "/") {
		if strings.HasPrefix(c, ".") || strings.HasSuffix(c, ".lock") {
			return false
		}
	}
	return true
}

func decodeRuntime(raw json.RawMessage) (RuntimePlan, error) {
	var p RuntimePlan
	m, err := closedStrings(raw, "runtime", map[string]*string{"harness": &p.Harness, "provider": &p.Provider, "size": &p.Size}, "!nodes")
	if err != nil {
		return RuntimePlan{}, err
	}
	allowed, ok := providers[p.Harness]
	if !ok {
		return RuntimePlan{}, schemaf("runtime.harness must be codex or claude")
	}
	if !slices.Contains(allowed, p.Provider) {
		return RuntimePlan{}, schemaf("runtime.provider of %s must be one of %s", p.Harness, strings.Join(allowed, ", "))
	}
	if !slices.Contains(runSizes, p.Size) {
		return RuntimePlan{}, schemaf("runtime.size must be one of %s", strings.Join(runSizes, ", "))
	}
	nodes, ok := protocol.ObjectMembers(m["nodes"])
	if !ok {
		return RuntimePlan{}, schemaf("runtime.nodes must be an object")
	}
	p.Nodes = make(map[string]Binding, len(nodes))
	for _, n := range nodes {
		if !graph.IsIdentifier(n.Key) {
			return RuntimePlan{}, schemaf("runtime.nodes: %q is not a node name", n.Key)
		}
		b, err := decodeBinding(n.Value, n.Key)
		if err != nil {
			return RuntimePlan{}, err
		}
		p.Nodes[n.Key] = b
	}
	return p, nil
}

func decodeBinding(raw json.RawMessage, node string) (Binding, error) {
	what := "runtime.nodes." + node
	probe, err := closedObject(raw, what, "!kind", "model", "effort", "sessionScope", "env")
	if err != nil {
		return Binding{}, err
	}
	var b Binding
	if b.Kind, err = str(probe, "kind", what); err != nil {
		return Binding{}, err
	}
	switch b.Kind {
	case KindAgent:
		_, err = closedObject(raw, what, "!kind", "!model", "effort", "sessionScope", "env")
	case KindGitDelivery:
		_, err = closedObject(raw, what, "!kind", "env")
	default:
		return Binding{}, schemaf("%s.kind must be agent or git_delivery", what)
	}
	if err != nil {
		return Binding{}, err
	}
	if b.Model, err = str(probe, "model", what); err != nil {
		return Binding{}, err
	}
	if b.Kind == KindAgent && (b.Model == "" || len(b.Model) > maxModelBytes) {
		return Binding{}, schemaf("%s.model must be 1..%d bytes", what, maxModelBytes)
	}
	if e := probe["effort"]; e != nil && string(e) != "null" {
		if b.Effort, err = str(probe, "effort", what); err != nil || !slices.Contains(efforts, b.Effort) {
			return Binding{}, schemaf("%s.effort must be one of %s", what, strings.Join(efforts, ", "))
		}
	}
	if b.SessionScope, err = str(probe, "sessionScope", what); err != nil {
		return Binding{}, err
	}
	switch b.SessionScope {
	case "", ScopeExecution:
		b.SessionScope = "" // the default is omitted on the wire
	case ScopeNodeInstance:
	default:
		return Binding{}, schemaf("%s.sessionScope must be execution or node_instance", what)
	}
	if b.Env, err = decodeEnv(probe["env"], what); err != nil {
		return Binding{}, err
	}
	return b, nil
}

func decodeEnv(raw json.RawMessage, what string) ([]string, error) {
	if raw == nil {
		return nil, nil
	}
	var names []string
	if err := json.Unmarshal(raw, &names); err != nil || names == nil {
		return nil, schemaf("%s.env must be an array of names", what)
	}
	if len(names) > MaxEnvNames {
		return nil, schemaf("%s.env declares more than %d names", what, MaxEnvNames)
	}
	for i, n := range names {
		if len(n) > maxEnvNameBytes || !envNameRE.MatchString(n) {
			return nil, schemaf("%s.env: %q is not an environment name", what, n)
		}
		if slices.Contains(names[:i], n) {
			return nil, schemaf("%s.env names %q twice", what, n)
		}
	}
	if len(names) == 0 {
		return nil, nil // an empty list is omitted on the wire
	}
	return names, nil
}

// Encode writes the submission in wire order with canonical values (the
// graph in its canonical field order, free-form values with sorted keys).
func (s *Submission) Encode() ([]byte, error) { return protocol.Marshal(s) }

// Digest identifies the submission's content: the SHA-256 of its
// canonical encoding. Two submissions that decode alike have one digest.
func (s *Submission) Digest() (string, error) {
	b, err := s.Encode()
	if err != nil {
		return "", err
	}
	return digestOf(b), nil
}

// digestOf is the digest of a submission encoded as b (Encode).
func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
