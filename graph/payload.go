package graph

import (
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ValidationError is a payload value that does not match its type.
// Error() is the exact reference message used as details.reason, e.g.
// "$ must be a null" or "$.text is missing required field text".
type ValidationError struct {
	Path    string // rooted at "$"
	Message string // the full message, path included
}

func (e *ValidationError) Error() string { return e.Message }

// Validate checks a JSON value against p: total, recursive, records
// closed. Fields are checked in sorted name order, then undeclared keys; the
// first failure is returned as a *ValidationError.
func (p PayloadType) Validate(value json.RawMessage) error {
	tree, err := parseJSON(value)
	if err != nil {
		return &ValidationError{Path: "$", Message: "$ is not valid JSON"}
	}
	return p.ValidateValue(tree)
}

// ValidateValue is Validate for an already-parsed value: nil, bool, string,
// json.Number or float64, []any, map[string]any.
func (p PayloadType) ValidateValue(v any) error {
	return p.validate(v, "$")
}

func mismatch(path string, kind PayloadKind) *ValidationError {
	return &ValidationError{Path: path, Message: path + " must be a " + string(kind)}
}

// numberValue returns the float value of a JSON number and whether the
// literal is an integer.
func numberValue(v any) (f float64, integer bool, ok bool) {
	switch t := v.(type) {
	case json.Number:
		lit := string(t)
		f, err := strconv.ParseFloat(lit, 64)
		if !strings.ContainsAny(lit, ".eE") {
			// Any JSON integer literal, however large, is an integer.
			return f, true, true
		}
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, false, false
		}
		return f, false, true
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			return 0, false, false
		}
		return t, false, true
	}
	return 0, false, false
}

func (p *PayloadType) validate(v any, path string) error {
	switch p.Kind {
	case PayloadNull:
		if v != nil {
			return mismatch(path, p.Kind)
		}
	case PayloadBoolean:
		if _, ok := v.(bool); !ok {
			return mismatch(path, p.Kind)
		}
	case PayloadInteger:
		f, integer, ok := numberValue(v)
		if !ok || (!integer && f != math.Trunc(f)) {
			return mismatch(path, p.Kind)
		}
	case PayloadNumber:
		if _, _, ok := numberValue(v); !ok {
			return mismatch(path, p.Kind)
		}
	case PayloadString:
		if _, ok := v.(string); !ok {
			return mismatch(path, p.Kind)
		}
	case PayloadEnum:
		s, ok := v.(string)
		if !ok {
			return mismatch(path, p.Kind)
		}
		if !slices.Contains(p.Values, s) {
			return &ValidationError{Path: path, Message: path + " contains unknown enum label " + s}
		}
	case PayloadArray:
		a, ok := v.([]any)
		if !ok {
			return mismatch(path, p.Kind)
		}
		if p.Items == nil {
			return nil
		}
		for i, e := range a {
			if err := p.Items.validate(e, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case PayloadRecord:
		obj, ok := v.(map[string]any)
		if !ok {
			return mismatch(path, p.Kind)
		}
		names := make([]string, 0, len(p.Fields))
		for k := range p.Fields {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, name := range names {
			f := p.Fields[name]
			fv, present := obj[name]
			if !present {
				if f.Required {
					return &ValidationError{Path: path, Message: path + " is missing required field " + name}
				}
				continue
			}
			if err := f.Type.validate(fv, path+"."+name); err != nil {
				return err
			}
		}
		for _, k := range sortedKeys(obj) {
			if _, declared := p.Fields[k]; !declared {
				return &ValidationError{Path: path, Message: path + " contains undeclared field " + k}
			}
		}
	default:
		return &ValidationError{Path: path, Message: path + " has an invalid payload type " + strconv.Quote(string(p.Kind))}
	}
	return nil
}

// IsSubtype reports S <: T: equal primitive kinds; integer <: number
// and no other primitive widening; arrays covariant; enums by label subset;
// records: every required field of T is required in S with a subtype, every
// optional field of T present in S has a subtype, extra S fields allowed.
func IsSubtype(s, t PayloadType) bool {
	switch t.Kind {
	case PayloadNull, PayloadBoolean, PayloadInteger, PayloadString:
		return s.Kind == t.Kind
	case PayloadNumber:
		return s.Kind == PayloadNumber || s.Kind == PayloadInteger
	case PayloadArray:
		if s.Kind != PayloadArray || s.Items == nil || t.Items == nil {
			return s.Kind == PayloadArray && s.Items == nil && t.Items == nil
		}
		return IsSubtype(*s.Items, *t.Items)
	case PayloadEnum:
		if s.Kind != PayloadEnum {
			return false
		}
		for _, l := range s.Values {
			if !slices.Contains(t.Values, l) {
				return false
			}
		}
		return true
	case PayloadRecord:
		if s.Kind != PayloadRecord {
			return false
		}
		for name, tf := range t.Fields {
			sf, ok := s.Fields[name]
			if !ok {
				if tf.Required {
					return false
				}
				continue
			}
			if tf.Required && !sf.Required {
				return false
			}
			if !IsSubtype(sf.Type, tf.Type) {
				return false
			}
		}
		return true
	}
	return false
}
