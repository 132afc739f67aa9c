package reduce

import (
	"encoding/json"
	"maps"

	"github.com/oecp/oecp/graph"
)

// ctrlKey addresses one control: node, source, field, map indices.
type ctrlKey struct {
	node     string
	source   graph.ControlSource
	field    string
	hasField bool
	idx      string
}

// ctrlVal is a control label; an empty label is a cleared control (a new
// outcome replaces a node's earlier controls), kept as an entry so that
// clearing survives fact merges.
type ctrlVal struct {
	label   string
	indices []uint64
}

type chanKey struct {
	node string
	idx  string
}

// channel is an executable's last successful outcome at one scope.
type channel struct {
	out     any
	signals map[string]string
	diag    any
}

// ctx is the evaluation context of one scope. Each ctx owns its maps;
// values are immutable (copy-on-write), so clone is shallow.
type ctx struct {
	state    any
	item     any
	hasItem  bool
	scope    []uint64
	controls map[ctrlKey]ctrlVal
	channels map[chanKey]*channel
	// visits counts the matched visits per occurrence key.
	visits  map[string]int
	written []graph.FieldPath
}

func newCtx(state any) *ctx {
	return &ctx{
		state:    state,
		controls: map[ctrlKey]ctrlVal{},
		channels: map[chanKey]*channel{},
		visits:   map[string]int{},
	}
}

func (c *ctx) clone() *ctx {
	d := *c
	d.controls = maps.Clone(c.controls)
	d.channels = maps.Clone(c.channels)
	d.visits = maps.Clone(c.visits)
	d.written = append([]graph.FieldPath(nil), c.written...)
	return &d
}

// adoptFacts replaces c's runtime facts with those of a scope derived from c
// (seq, choice, loop copy-out: the child started as a copy of c, so its facts
// are a superset).
func (c *ctx) adoptFacts(child *ctx) {
	c.controls, c.channels, c.visits = child.controls, child.channels, child.visits
}

// mergeFacts copies into c the facts src changed relative to base (the
// context src was cloned from): par winners and map items. Visit counters
// take the maximum, so a sibling's stale copy never rewinds them.
func (c *ctx) mergeFacts(src, base *ctx) {
	c.mergeChanged(src, base)
	c.mergeVisits(src)
}

// mergeChanged copies into c the controls and channels src changed
// relative to base.
func (c *ctx) mergeChanged(src, base *ctx) {
	for k, v := range src.controls {
		if b, ok := base.controls[k]; !ok || b.label != v.label {
			c.controls[k] = v
		}
	}
	for k, v := range src.channels {
		if base.channels[k] != v {
			c.channels[k] = v
		}
	}
}

func (c *ctx) mergeVisits(src *ctx) {
	for k, v := range src.visits {
		if v > c.visits[k] {
			c.visits[k] = v
		}
	}
}

func (c *ctx) setControl(node string, source graph.ControlSource, field *string, indices []uint64, label string) {
	k := ctrlKey{node: node, source: source, idx: idxKey(indices)}
	if field != nil {
		k.field, k.hasField = *field, true
	}
	c.controls[k] = ctrlVal{label: label, indices: indices}
}

func strp(s string) *string { return &s }

// resolve reads a control selector as a list of labels: exact when
// the node sits at or above the current scope, aggregate over items when it
// sits inside a map the current scope is outside of.
func (c *ctx) resolve(ix *graphIndex, sel graph.ControlSelector) []string {
	d := ix.depth[sel.Name]
	match := func(k ctrlKey) bool {
		if k.node != sel.Name || k.source != sel.Source {
			return false
		}
		if sel.Field == nil {
			return !k.hasField
		}
		return k.hasField && k.field == *sel.Field
	}
	if d <= len(c.scope) {
		k := ctrlKey{node: sel.Name, source: sel.Source, idx: idxKey(c.scope[:d])}
		if sel.Field != nil {
			k.field, k.hasField = *sel.Field, true
		}
		if v, ok := c.controls[k]; ok && v.label != "" {
			return []string{v.label}
		}
		return nil
	}
	var out []string
	for k, v := range c.controls {
		if v.label != "" && len(v.indices) == d && hasPrefix(v.indices, c.scope) && match(k) {
			out = append(out, v.label)
		}
	}
	return out
}

func anyIn(labels, set []string) bool {
	for _, l := range labels {
		for _, s := range set {
			if l == s {
				return true
			}
		}
	}
	return false
}

// evalGuard evaluates a guard on c. Guards never fail.
func (c *ctx) evalGuard(ix *graphIndex, g *graph.Guard) bool {
	if g == nil {
		return false
	}
	switch g.Kind {
	case graph.GuardIn:
		if g.Value == nil {
			return false
		}
		return anyIn(c.resolve(ix, *g.Value), g.Labels)
	case graph.GuardAll:
		for i := range g.Guards {
			if !c.evalGuard(ix, &g.Guards[i]) {
				return false
			}
		}
		return true
	case graph.GuardAny:
		for i := range g.Guards {
			if c.evalGuard(ix, &g.Guards[i]) {
				return true
			}
		}
		return false
	case graph.GuardNot:
		return !c.evalGuard(ix, g.Inner)
	case graph.GuardKOfN:
		var n uint64
		for _, s := range g.Values {
			if anyIn(c.resolve(ix, s), g.Labels) {
				n++
			}
		}
		return n >= g.Count
	case graph.GuardKOfMap:
		if g.Value == nil {
			return false
		}
		var n uint64
		for _, l := range c.resolve(ix, *g.Value) {
			if anyIn([]string{l}, g.Labels) {
				n++
			}
		}
		return n >= g.Count
	}
	return false
}

// buildInput builds an executable's input: null without bindings, else an
// object built binding by binding in authored order.
func (c *ctx) buildInput(bs []graph.InputBinding) (any, error) {
	if len(bs) == 0 {
		return nil, nil
	}
	var out any = map[string]any{}
	for _, b := range bs {
		src, err := c.dataSource(b.Value.Source, "")
		if err != nil {
			return nil, err
		}
		v, err := selectPath(src, b.Value.Path)
		if err != nil {
			return nil, err
		}
		if out, err = setPath(out, b.Target, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// dataSource returns the value a data selector with source s reads: the
// state, or the current map item. prefix names the reader in an error.
func (c *ctx) dataSource(s graph.DataSource, prefix string) (any, error) {
	switch s {
	case graph.SourceState:
		return c.state, nil
	case graph.SourceItem:
		if !c.hasItem {
			return nil, errf(ErrMissingSelectedValue, "%sitem selector outside a map", prefix)
		}
		return c.item, nil
	}
	return nil, errf(ErrInvalidGraph, "%sunknown data source %q", prefix, s)
}

// canonicalInput is buildInput as canonical JSON.
func (c *ctx) canonicalInput(bs []graph.InputBinding) (json.RawMessage, error) {
	v, err := c.buildInput(bs)
	if err != nil {
		return nil, err
	}
	return canonical(v)
}
