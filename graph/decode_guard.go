package graph

// Selectors, bindings, guards and joins. A selector is always a closed
// object: a string in its place (a path expression) is STRING_SELECTOR.

// openSelector starts reading a selector with exactly the members given.
func openSelector(v any, path, what string, members ...string) *reader {
	return openClosed(v, path, what, ViolationStringSelector, ViolationUnknownField, members...)
}

func (r *reader) selectorPath() FieldPath { return r.fieldPath("path", "selector path") }

func decodeDataSelector(v any, path string) (DataSelector, error) {
	r := openSelector(v, path, "data selector", "source", "path")
	source := r.oneOf("source", "data selector source", string(SourceState), string(SourceItem))
	return DataSelector{Source: DataSource(source), Path: r.selectorPath()}, r.err
}

func decodeOutputSelector(v any, path string) (NodeOutputSelector, error) {
	r := openSelector(v, path, "node output selector", "node", "channel", "path")
	return NodeOutputSelector{
		Node:    r.ident("node", "node name"),
		Channel: OutputChannel(r.oneOf("channel", "channel", string(ChannelOut), string(ChannelSignal), string(ChannelDiagnostic))),
		Path:    r.selectorPath(),
	}, r.err
}

func decodeControlSelector(v any, path string) (ControlSelector, error) {
	r := openSelector(v, path, "control selector", "name", "source", "field")
	return ControlSelector{
		Name:   r.ident("name", "node name"),
		Source: ControlSource(r.oneOf("source", "control source", string(ControlSignal), string(ControlError), string(ControlGroup))),
		Field:  optMember(r, "field", named("control field", decodeIdentifier)),
	}, r.err
}

func decodeInputBinding(v any, path string) (InputBinding, error) {
	r := openClosed(v, path, "input binding", ViolationInvalidType, ViolationUnknownField, "target", "value")
	return InputBinding{
		Target: r.fieldPath("target", "binding target"),
		Value:  member(r, "value", decodeDataSelector),
	}, r.err
}

func decodeWriteBinding(v any, path string) (WriteBinding, error) {
	r := openClosed(v, path, "write binding", ViolationInvalidType, ViolationUnknownField, "value", "target")
	return WriteBinding{
		Value:  member(r, "value", decodeOutputSelector),
		Target: r.fieldPath("target", "binding target"),
	}, r.err
}

func (r *reader) inputBindings(key string) []InputBinding {
	return member(r, key, func(v any, p string) ([]InputBinding, error) {
		return decodeList(v, p, "input bindings", false, decodeInputBinding)
	})
}

var guardTag = &kindTag[GuardKind]{
	what: "guard", noun: "guard", suffix: " guard", code: ViolationExecutableGuard,
	expected: "in, all, any, not, k_of_n or k_of_map",
	members: map[GuardKind][]string{
		GuardIn:     {"kind", "value", "labels"},
		GuardAll:    {"kind", "guards"},
		GuardAny:    {"kind", "guards"},
		GuardNot:    {"kind", "guard"},
		GuardKOfN:   {"kind", "count", "values", "labels"},
		GuardKOfMap: {"kind", "count", "value", "labels"},
	},
}

// decodeGuard reads a guard's members in this order: count, then the
// operands (value, guards, guard or values), then labels.
func decodeGuard(v any, path string) (Guard, error) {
	r, kind, allowed := guardTag.open(v, path)
	r.only(ViolationExecutableGuard, allowed...)
	g := Guard{Kind: kind}
	if kind == GuardKOfN || kind == GuardKOfMap {
		g.Count = r.positive("count", "guard count")
	}
	switch kind {
	case GuardIn, GuardKOfMap:
		g.Value = memberPtr(r, "value", decodeControlSelector)
	case GuardAll, GuardAny:
		g.Guards = member(r, "guards", func(v any, p string) ([]Guard, error) {
			return decodeList(v, p, "guard operands", true, decodeGuard)
		})
	case GuardNot:
		g.Inner = memberPtr(r, "guard", decodeGuard)
	case GuardKOfN:
		g.Values = member(r, "values", func(v any, p string) ([]ControlSelector, error) {
			return decodeList(v, p, "guard selectors", true, decodeControlSelector)
		})
	}
	if kind == GuardIn || kind == GuardKOfN || kind == GuardKOfMap {
		g.Labels = r.labelSet("labels", "guard labels")
	}
	return g, r.err
}

// decodeJoin reads a par join: its kind first, then the members that kind
// has (quorum: count, first: when).
func decodeJoin(v any, path string) (Join, error) {
	r, kv, kind := openKind(v, path, "join", " join")
	j := Join{Kind: JoinKind(kind)}
	switch j.Kind {
	case JoinAll, JoinAny:
		r.only(ViolationUnknownField, "kind")
	case JoinQuorum:
		r.only(ViolationUnknownField, "kind", "count")
		j.Count = r.positive("count", "quorum count")
	case JoinFirst:
		r.only(ViolationUnknownField, "kind", "when")
		j.When = memberPtr(r, "when", decodeGuard)
	default:
		r.fail("kind", ViolationInvalidValue, "unknown join kind %s (expected all, any, quorum or first)", quoteAny(kv))
	}
	return j, r.err
}
