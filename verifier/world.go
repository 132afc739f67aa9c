package verifier

import (
	"sort"
	"strconv"
	"strings"
)

// world is one abstract execution path: the values of the control variables
// some guard reads (unset = absent), the definitely-defined state paths per
// scope (innermost last), and, for nodes whose output another node reads,
// whether they ran and whether their latest outcome succeeded. Worlds with
// equal controls and tag are merged by intersecting the sets: no later
// guard can tell them apart, so "defined on every path" is unchanged.
type world struct {
	m      *meter // shared work meter of the analysis (nil: unmetered)
	tag    int
	ctl    map[string]string // copy-on-write: shared between clones until set
	shared bool              // ctl is shared with another world
	h      uint64            // order-independent hash of ctl (sum of entryHash)
	scopes []map[string]bool
	ran    map[string]bool
	ok     map[string]bool
}

func copySet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (w *world) size() int {
	n := 1 + len(w.ran) + len(w.ok)
	for _, s := range w.scopes {
		n += len(s)
	}
	return n
}

func (w *world) clone() *world {
	// Each map allocated costs about as much as a few entries copied.
	w.m.charge(4*(2+len(w.scopes)) + w.size())
	c := &world{m: w.m, tag: w.tag, ctl: w.ctl, shared: true, h: w.h, ran: copySet(w.ran), ok: copySet(w.ok)}
	w.shared = true
	c.scopes = make([]map[string]bool, len(w.scopes))
	for i, s := range w.scopes {
		c.scopes[i] = copySet(s)
	}
	return c
}

func (w *world) top() map[string]bool { return w.scopes[len(w.scopes)-1] }

func (w *world) push() {
	w.m.charge(1 + len(w.top()))
	w.scopes = append(w.scopes, copySet(w.top()))
}

func (w *world) pop() map[string]bool {
	t := w.top()
	w.scopes = w.scopes[:len(w.scopes)-1]
	return t
}

// entryHash hashes one control entry (FNV-1a, then a final mix).
func entryHash(k, v string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(k); i++ {
		h ^= uint64(k[i])
		h *= 1099511628211
	}
	h ^= 0xff
	h *= 1099511628211
	for i := 0; i < len(v); i++ {
		h ^= uint64(v[i])
		h *= 1099511628211
	}
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 32
	return h
}

// own makes w's control map private before a write.
func (w *world) own() {
	if !w.shared {
		return
	}
	w.m.charge(1 + len(w.ctl))
	c := make(map[string]string, len(w.ctl)+1)
	for k, v := range w.ctl {
		c[k] = v
	}
	w.ctl, w.shared = c, false
}

func (w *world) set(key, val string) {
	old, had := w.ctl[key]
	if old == val || (!had && val == "") {
		return
	}
	w.own()
	if had {
		w.h -= entryHash(key, old)
	}
	if val == "" {
		delete(w.ctl, key)
	} else {
		w.ctl[key] = val
		w.h += entryHash(key, val)
	}
}

// sameCtl reports whether two worlds have equal controls.
func sameCtl(a, b *world) bool {
	if a.h != b.h || len(a.ctl) != len(b.ctl) {
		return false
	}
	a.m.charge(1 + len(a.ctl))
	for k, v := range a.ctl {
		if bv, ok := b.ctl[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func (w *world) key() string {
	n := 1
	for k, v := range w.ctl {
		n += 4 + (len(k)+len(v))/16
	}
	w.m.charge(n)
	keys := make([]string, 0, len(w.ctl))
	for k := range w.ctl {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(strconv.Itoa(w.tag))
	for _, k := range keys {
		b.WriteByte(0)
		b.WriteString(k)
		b.WriteByte(1)
		b.WriteString(w.ctl[k])
	}
	return b.String()
}

func setKey(m map[string]bool) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return strings.Join(keys, "\x02")
}

// fingerprint identifies the whole world (for loop fixpoints).
func (w *world) fingerprint() string {
	w.m.charge(w.size())
	var b strings.Builder
	b.WriteString(w.key())
	for _, s := range w.scopes {
		b.WriteString("\x03")
		b.WriteString(setKey(s))
	}
	b.WriteString("\x04")
	b.WriteString(setKey(w.ran))
	b.WriteString("\x04")
	b.WriteString(setKey(w.ok))
	return b.String()
}

func intersect(m *meter, a, b map[string]bool) {
	m.charge(1 + len(a))
	for k := range a {
		if !b[k] {
			delete(a, k)
		}
	}
}

// mergeWorlds deduplicates worlds by key, intersecting their sets.
func mergeWorlds(ws []*world) []*world {
	if len(ws) < 2 {
		return ws
	}
	type wkey struct {
		tag int
		h   uint64
	}
	idx := make(map[wkey][]int, len(ws))
	out := ws[:0:0]
	for _, w := range ws {
		k := wkey{w.tag, w.h}
		i, found := -1, false
		for _, j := range idx[k] {
			if sameCtl(out[j], w) {
				i, found = j, true
				break
			}
		}
		if found {
			o := out[i]
			n := min(len(o.scopes), len(w.scopes))
			for j := 0; j < n; j++ {
				intersect(w.m, o.scopes[j], w.scopes[j])
			}
			intersect(w.m, o.ran, w.ran)
			intersect(w.m, o.ok, w.ok)
			continue
		}
		idx[k] = append(idx[k], len(out))
		out = append(out, w)
	}
	return out
}

func sameWorlds(a, b []*world) bool {
	if len(a) != len(b) {
		return false
	}
	fa := make([]string, len(a))
	fb := make([]string, len(b))
	for i := range a {
		fa[i], fb[i] = a[i].fingerprint(), b[i].fingerprint()
	}
	sort.Strings(fa)
	sort.Strings(fb)
	for i := range fa {
		if fa[i] != fb[i] {
			return false
		}
	}
	return true
}
