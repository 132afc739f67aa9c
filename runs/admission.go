package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/nativegraph"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/verifier"
)

// The closed model catalogue per harness. Models listed in noEffort take
// no reasoning effort; every other model defaults to defaultEffort.
var (
	models = map[string][]string{
		HarnessCodex:  {"gpt-5.6", "gpt-5.6-sol", "gpt-5.6-terra", "gpt-5.6-luna"},
		HarnessClaude: {"claude-haiku-4-5", "claude-sonnet-5", "claude-opus-5", "claude-fable-5"},
	}
	noEffort = []string{"claude-haiku-4-5"}
)

const defaultEffort = "max"

// Verify runs the production verifier over a graph with the graph-local
// worker registry admission built for it. A returned error is an internal
// failure (cancellation included), never a rejection.
type Verify func(ctx context.Context, g *graph.GraphSpec, reg verifier.Registry) (verifier.Result, error)

// VerifyDirect runs verifier.New(reg).Verify on the calling goroutine.
func VerifyDirect(_ context.Context, g *graph.GraphSpec, reg verifier.Registry) (verifier.Result, error) {
	return verifier.New(reg).Verify(g), nil
}

// rejection is an admission failure: GRAPH_INVALID with either the
// verifier's diagnostics or, for a rule that has no diagnostic code of its
// own (the runtime plan, the native restrictions), a reason.
type rejection struct {
	reason      string
	diagnostics []graph.Diagnostic
}

func (r *rejection) Error() string {
	if r.reason != "" {
		return "admission: " + r.reason
	}
	return fmt.Sprintf("admission: graph verification failed (%d diagnostics)", len(r.diagnostics))
}

func rejectf(format string, args ...any) error {
	return &rejection{reason: fmt.Sprintf(format, args...)}
}

// wire is the rejection's JSON-RPC error: -32602 GRAPH_INVALID.
func (r *rejection) wire() *protocol.Error {
	details := map[string]any{"reason": r.reason}
	if r.reason == "" {
		details = map[string]any{"diagnostics": r.diagnostics}
	}
	return protocol.NewError(protocol.CodeInvalidParams, protocol.MsgInvalidParams, protocol.GraphInvalid, details)
}

// admit applies the native admission rules to a decoded submission, in
// the reference's order, then runs the verifier over the graph-local
// registry. On success the submission's runtime plan is normalized (the
// default effort filled in).
func admit(ctx context.Context, s *Submission, host Harnesses, ws Workspaces, verify Verify) error {
	g := s.Graph
	if g.Profile != graph.ProfileFull {
		return rejectf("graph profile must be %s", graph.ProfileFull)
	}
	if err := g.InitialInput.Validate(json.RawMessage(s.InitialInput)); err != nil {
		return rejectf("initialInput does not match the graph's initialInput type: %v", err)
	}
	execs := nativegraph.Executables(g)
	for _, name := range sortedKeys(execs) {
		if a, _ := leaf(execs[name]); a != 1 {
			return rejectf("executable %q must declare attempts 1 (native runs never retry)", name)
		}
	}
	if err := checkPlan(s, execs, host, ws); err != nil {
		return err
	}
	if ws != nil {
		if err := ws.CheckSource(identity.From(ctx).Tenant, s.Source); err != nil {
			// The same words for every refusal: the host's side of it
			// (its file, whether the repository exists) stays there.
			return rejectf("repository is not served: %s", s.Source.Repository)
		}
	}
	if err := nativegraph.CheckOverlap(g.Root); err != nil {
		return ruleRejection(err)
	}
	reg, err := nativegraph.LocalRegistry(execs)
	if err != nil {
		return ruleRejection(err)
	}
	res, err := verify(ctx, g, reg)
	if err != nil {
		return err
	}
	if !res.OK() {
		return &rejection{diagnostics: res.Diagnostics}
	}
	return nil
}

// leaf returns an executable's attempts and instructions.
func leaf(n graph.Node) (attempts uint64, instr *string) {
	if st, ok := n.(*graph.Step); ok {
		return st.Attempts, st.Instructions
	}
	if v, ok := n.(*graph.Verifier); ok {
		return v.Attempts, v.Instructions
	}
	return 0, nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := slices.Collect(maps.Keys(m))
	sort.Strings(ks)
	return ks
}

// checkPlan applies the runtime-plan rules: the plan binds exactly the
// executables; the host configured the plan's harness; agent nodes carry
// instructions and name a catalogued model with an allowed effort; the run
// declares at most MaxEnvNames distinct environment names, each allowed by
// the host's harness entry; git delivery nodes, admitted only by a host
// with workspaces, declare the delivery contract and no environment
// (their credentials are the host's).
func checkPlan(s *Submission, execs map[string]graph.Node, host Harnesses, ws Workspaces) error {
	p := &s.Runtime
	for _, name := range sortedKeys(execs) {
		if _, ok := p.Nodes[name]; !ok {
			return rejectf("runtime plan does not bind executable %q", name)
		}
	}
	for _, name := range sortedKeys(p.Nodes) {
		if _, ok := execs[name]; !ok {
			return rejectf("runtime plan binds %q, which is not an executable of the graph", name)
		}
	}
	declared := map[string]bool{}
	for _, name := range sortedKeys(p.Nodes) {
		b := p.Nodes[name]
		if b.Kind == KindGitDelivery {
			if err := checkDelivery(name, b, execs[name], ws); err != nil {
				return err
			}
			continue
		}
		if _, instr := leaf(execs[name]); instr == nil {
			return rejectf("agent node %q must carry instructions", name)
		}
		if !slices.Contains(models[p.Harness], b.Model) {
			return rejectf("node %q: model %q is not in the %s catalogue (%s)", name, b.Model, p.Harness, strings.Join(models[p.Harness], ", "))
		}
		switch {
		case slices.Contains(noEffort, b.Model) && b.Effort != "":
			return rejectf("node %q: model %q takes no effort", name, b.Model)
		case !slices.Contains(noEffort, b.Model) && b.Effort == "":
			b.Effort = defaultEffort
			p.Nodes[name] = b
		}
		for _, e := range b.Env {
			declared[e] = true
		}
	}
	if len(declared) > MaxEnvNames {
		return rejectf("the run declares %d environment names; at most %d are allowed", len(declared), MaxEnvNames)
	}
	if host == nil {
		return rejectf("the plan uses harness %q but this server offers no harness (its operator configures them)", p.Harness)
	}
	if err := host.CheckPlan(p.Harness, p.Nodes); err != nil {
		return rejectf("%v", err)
	}
	return nil
}

// checkDelivery admits a git delivery node.
func checkDelivery(name string, b Binding, node graph.Node, ws Workspaces) error {
	switch {
	case ws == nil:
		return rejectf("node %q: git delivery needs a host that serves repositories (start oecp serve with --repos FILE)", name)
	case len(b.Env) > 0:
		return rejectf("node %q: a git_delivery binding declares no env; delivery's credentials come from the host's --repos entry", name)
	}
	if err := ws.CheckDelivery(node); err != nil {
		return rejectf("node %q: %v", name, err)
	}
	return nil
}

// ruleRejection is a native rule's refusal (nativegraph.ErrRule) as an
// admission rejection, in its own words.
func ruleRejection(err error) error {
	if !errors.Is(err, nativegraph.ErrRule) {
		return err
	}
	return rejectf("%s", strings.TrimPrefix(err.Error(), nativegraph.ErrRule.Error()+": "))
}
