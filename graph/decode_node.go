package graph

var nodeTag = &kindTag[NodeKind]{
	what: "graph node", noun: "node", suffix: " node", code: ViolationUnknownNode,
	expected: "step, verifier, seq, choice, par, loop, map, succeed or fail",
	members: map[NodeKind][]string{
		KindStep:     {"kind", "name", "worker", "instructions", "input", "output", "inputBindings", "writeBindings", "timeoutMs", "attempts"},
		KindVerifier: {"kind", "name", "worker", "input", "output", "inputBindings", "writeBindings", "timeoutMs", "attempts", "signals", "diagnostic", "instructions"},
		KindSeq:      {"kind", "name", "state", "children", "promotedStatePaths"},
		KindChoice:   {"kind", "name", "state", "branches", "otherwise", "promotedStatePaths"},
		KindPar:      {"kind", "name", "state", "branches", "promotedStatePaths", "join"},
		KindLoop:     {"kind", "name", "state", "body", "until", "maxIterations", "promotedStatePaths"},
		KindMap:      {"kind", "name", "state", "body", "over", "maxItems", "promotedStatePaths"},
		KindSucceed:  {"kind", "name", "output", "bindings"},
		KindFail:     {"kind", "name", "reason"},
	},
}

// decodeNode decodes one node and its subtree. The members of each kind are
// read in the order its struct lists them (Go evaluates a composite
// literal's calls left to right), so the first failure reported is the
// first in that order.
func decodeNode(v any, path string) (Node, error) {
	r, kind, allowed := nodeTag.open(v, path)
	if kind == KindStep || kind == KindVerifier {
		// Extra keys on executables are where commands, endpoints and
		// credentials would be smuggled in.
		r.only(ViolationForbiddenWorkerField, allowed...)
	} else {
		r.only(ViolationUnknownField, allowed...)
	}
	if r.err != nil {
		return nil, r.err
	}
	var n Node
	switch kind {
	case KindStep, KindVerifier:
		n = r.executable(kind)
	case KindSeq:
		n = &Seq{Name: r.name(), State: r.payload("state"), Children: r.nodes("children"), PromotedStatePaths: r.promoted()}
	case KindChoice:
		n = &Choice{Name: r.name(), State: r.payload("state"), Branches: r.branches(), Otherwise: r.optNode("otherwise"), PromotedStatePaths: r.promoted()}
	case KindPar:
		n = &Par{Name: r.name(), State: r.payload("state"), Branches: r.nodes("branches"), PromotedStatePaths: r.promoted(), Join: member(r, "join", decodeJoin)}
	case KindLoop:
		n = &Loop{Name: r.name(), State: r.payload("state"), Body: member(r, "body", decodeNode),
			Until: optMember(r, "until", decodeGuard), MaxIterations: r.positive("maxIterations", "maxIterations"), PromotedStatePaths: r.promoted()}
	case KindMap:
		n = &Map{Name: r.name(), State: r.payload("state"), Body: member(r, "body", decodeNode),
			Over: member(r, "over", decodeDataSelector), MaxItems: r.positive("maxItems", "maxItems"), PromotedStatePaths: r.promoted()}
	case KindSucceed:
		n = &Succeed{Name: r.name(), Output: r.payload("output"), Bindings: r.inputBindings("bindings")}
	case KindFail:
		f := &Fail{Name: r.name(), Reason: r.ident("reason", "fail reason")}
		if r.err == nil && f.Reason == ReservedFailReason {
			r.fail("reason", ViolationInvalidValue, "fail reason %q is reserved", ReservedFailReason)
		}
		n = f
	}
	if r.err != nil {
		return nil, r.err
	}
	return n, nil
}

// executable reads a step or a verifier: the verifier adds signals and a
// diagnostic type, and lists instructions last.
func (r *reader) executable(kind NodeKind) Node {
	if kind == KindStep {
		return &Step{Name: r.name(), Worker: r.worker(), Instructions: r.instructions(),
			Input: r.payload("input"), Output: r.payload("output"),
			InputBindings: r.inputBindings("inputBindings"), WriteBindings: r.writeBindings(),
			TimeoutMs: r.positive("timeoutMs", "timeoutMs"), Attempts: r.positive("attempts", "attempts")}
	}
	return &Verifier{Name: r.name(), Worker: r.worker(),
		Input: r.payload("input"), Output: r.payload("output"),
		InputBindings: r.inputBindings("inputBindings"), WriteBindings: r.writeBindings(),
		TimeoutMs: r.positive("timeoutMs", "timeoutMs"), Attempts: r.positive("attempts", "attempts"),
		Signals: r.signals(), Diagnostic: r.payload("diagnostic"), Instructions: r.instructions()}
}

func (r *reader) name() string { return r.ident("name", "node name") }

func (r *reader) worker() string { return r.stableRef("worker", "worker reference") }

func (r *reader) nodes(key string) []Node {
	return member(r, key, func(v any, p string) ([]Node, error) { return decodeList(v, p, key, true, decodeNode) })
}

// optNode reads an optional node member; null means absent.
func (r *reader) optNode(key string) Node {
	if n := optMember(r, key, decodeNode); n != nil {
		return *n
	}
	return nil
}

func (r *reader) promoted() []FieldPath {
	return member(r, "promotedStatePaths", named("promotedStatePaths", decodeFieldPaths))
}

func (r *reader) writeBindings() []WriteBinding {
	return member(r, "writeBindings", func(v any, p string) ([]WriteBinding, error) {
		return decodeList(v, p, "write bindings", false, decodeWriteBinding)
	})
}

func (r *reader) branches() []ChoiceBranch {
	return member(r, "branches", func(v any, p string) ([]ChoiceBranch, error) {
		return decodeList(v, p, "choice branches", true, decodeBranch)
	})
}

func decodeBranch(v any, path string) (ChoiceBranch, error) {
	r := openClosed(v, path, "choice branch", ViolationInvalidType, ViolationUnknownField, "when", "node")
	return ChoiceBranch{When: member(r, "when", decodeGuard), Node: member(r, "node", decodeNode)}, r.err
}

// instructions reads the optional NodeInstructions; null means absent.
func (r *reader) instructions() *string {
	s := optMember(r, "instructions", named("instructions", asString))
	if s != nil && !IsNodeInstructions(*s) {
		r.fail("instructions", ViolationInvalidString, "instructions must be at most %d bytes, contain a non-whitespace character and no NUL", MaxInstructionsBytes)
		return nil
	}
	return s
}

// signals reads a verifier's signal map: field name to its label set.
func (r *reader) signals() map[string][]string {
	return member(r, "signals", func(v any, p string) (map[string][]string, error) {
		return decodeNameMap(v, p, "signals", "signal field %q is not an identifier", named("signal labels", decodeLabelSet))
	})
}
