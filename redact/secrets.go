package redact

import "strings"

// Marker replaces a spelling of a declared value.
const Marker = "[REDACTED]"

// Secrets is the declared values of one execution or run, as Spellings
// spells them. A nil *Secrets redacts nothing.
type Secrets struct {
	spellings []string
	rep       *strings.Replacer
}

// New returns the Secrets of the declared values; nil when none is
// non-empty.
func New(values []string) *Secrets {
	sp := Spellings(values)
	if len(sp) == 0 {
		return nil
	}
	pairs := make([]string, 0, 2*len(sp))
	for _, s := range sp {
		pairs = append(pairs, s, Marker)
	}
	return &Secrets{spellings: sp, rep: strings.NewReplacer(pairs...)}
}

// Spellings returns the spellings redacted, longest first (none for nil);
// the caller must not change the slice.
func (s *Secrets) Spellings() []string {
	if s == nil {
		return nil
	}
	return s.spellings
}

// Replace returns text with every spelling replaced by Marker. At each
// position the longest spelling that starts there wins (strings.Replacer
// prefers the earlier pair, and the pairs are longest first).
func (s *Secrets) Replace(text string) string {
	if s == nil {
		return text
	}
	return s.rep.Replace(text)
}
