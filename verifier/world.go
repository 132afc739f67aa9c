package verifier

import (
	"sort"
	"strings"
)

// world is one abstract execution path: the values of the control variables
// some guard reads (unset = absent), the definitely-defined state paths per
// scope (innermost last), and, for nodes whose output another node reads,
// whether they ran and whether their latest outcome succeeded. Worlds with
// equal controls and tag are merged by intersecting the sets: no later
// guard can tell them apart, so "defined on every path" is unchanged.
type world struct {
	tag    int
	ctl    map[string]string
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

func (w *world) clone() *world {
	c := &world{tag: w.tag, ctl: make(map[string]string, len(w.ctl)), ran: copySet(w.ran), ok: copySet(w.ok)}
	for k, v := range w.ctl {
		c.ctl[k] = v
	}
	c.scopes = make([]map[string]bool, len(w.scopes))
	for i, s := range w.scopes {
		c.scopes[i] = copySet(s)
	}
	return c
}

func (w *world) top() map[string]bool { return w.scopes[len(w.scopes)-1] }

func (w *world) push() { w.scopes = append(w.scopes, copySet(w.top())) }

func (w *world) pop() map[string]bool {
	t := w.top()
	w.scopes = w.scopes[:len(w.scopes)-1]
	return t
}

func (w *world) set(key, val string) {
	if val == "" {
		delete(w.ctl, key)
	} else {
		w.ctl[key] = val
	}
}

func (w *world) key() string {
	keys := make([]string, 0, len(w.ctl))
	for k := range w.ctl {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(itoa(w.tag))
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

func intersect(a, b map[string]bool) {
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
	idx := make(map[string]int, len(ws))
	out := ws[:0:0]
	for _, w := range ws {
		k := w.key()
		if i, ok := idx[k]; ok {
			o := out[i]
			n := min(len(o.scopes), len(w.scopes))
			for j := 0; j < n; j++ {
				intersect(o.scopes[j], w.scopes[j])
			}
			intersect(o.ran, w.ran)
			intersect(o.ok, w.ok)
			continue
		}
		idx[k] = len(out)
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

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	neg := i < 0
	if neg {
		i = -i
	}
	var buf [20]byte
	p := len(buf)
	for i > 0 {
		p--
		buf[p] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		p--
		buf[p] = '-'
	}
	return string(buf[p:])
}
