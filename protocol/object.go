package protocol

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// object is a closed params object collapsed last-wins. Its readers keep
// the first failure in err: once it is set every further read is a no-op
// returning the zero value, so each Decode function reads field after
// field and returns err once.
type object struct {
	fields map[string]json.RawMessage
	err    error
}

func decodeObject(raw json.RawMessage, allowed ...string) *object {
	members, ok := ObjectMembers(raw)
	if !ok {
		return &object{err: fmt.Errorf("%w: invalid type: expected a map", ErrDecode)}
	}
	o := &object{}
	if len(members) > 0 {
		o.fields = make(map[string]json.RawMessage, len(members))
	}
	for _, m := range members {
		if !slices.Contains(allowed, m.Key) {
			o.err = unknownField(m.Key, allowed)
			return o
		}
		o.fields[m.Key] = trimSpace(m.Value)
	}
	return o
}

func unknownField(k string, allowed []string) error {
	if len(allowed) == 0 {
		return fmt.Errorf("%w: unknown field `%s`, there are no fields", ErrDecode, k)
	}
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = "`" + a + "`"
	}
	return fmt.Errorf("%w: unknown field `%s`, expected one of %s", ErrDecode, k, strings.Join(quoted, ", "))
}

// fail records err unless a failure is recorded already.
func (o *object) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// has reports whether k is present (explicit null included).
func (o *object) has(k string) bool {
	_, ok := o.fields[k]
	return o.err == nil && ok
}

func (o *object) isNull(k string) bool { return string(o.fields[k]) == "null" }

func missing(k string) error { return fmt.Errorf("%w: missing field `%s`", ErrDecode, k) }

func invalid(k, want string) error {
	return fmt.Errorf("%w: invalid type for `%s`: expected %s", ErrDecode, k, want)
}

// raw returns the required member k undecoded.
func (o *object) raw(k string) json.RawMessage {
	if o.err != nil {
		return nil
	}
	raw, ok := o.fields[k]
	if !ok {
		o.fail(missing(k))
	}
	return raw
}

// opt reads the member k with read when it is present (explicit null
// included, which read then rejects unless it accepts null).
func opt[T any](o *object, k string, read func(k string) T) *T {
	if !o.has(k) {
		return nil
	}
	v := read(k)
	if o.err != nil {
		return nil
	}
	return &v
}

// str decodes a required string field.
func (o *object) str(k string) string {
	raw := o.raw(k)
	if o.err != nil {
		return ""
	}
	s, ok := unquote(raw)
	if !ok {
		o.fail(invalid(k, "a string"))
	}
	return s
}

// optStr decodes an optional string that accepts null as absent.
func (o *object) optStr(k string) *string {
	if o.isNull(k) {
		return nil
	}
	return opt(o, k, o.str)
}

// boolean decodes a required boolean field.
func (o *object) boolean(k string) bool {
	switch string(o.raw(k)) {
	case "true":
		return true
	case "false":
	default:
		o.fail(invalid(k, "a boolean"))
	}
	return false
}

// generation decodes a Generation: 0..2^53-1, integral floats accepted.
func (o *object) generation(k string) int64 {
	raw := o.raw(k)
	if o.err != nil {
		return 0
	}
	n, err := parseSafeInt(k, raw, 0)
	o.fail(err)
	return n
}

// parseSafeInt accepts an integer (or integral float) in [min, 2^53-1].
func parseSafeInt(k string, raw json.RawMessage, min int64) (int64, error) {
	lit := string(raw)
	if lit == "" || !(lit[0] == '-' || (lit[0] >= '0' && lit[0] <= '9')) {
		return 0, invalid(k, "an integer")
	}
	var n int64
	if strings.ContainsAny(lit, ".eE") {
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil || f != math.Trunc(f) || f < float64(min) || f > MaxSafeInteger {
			return 0, fmt.Errorf("%w: invalid value for `%s`: expected an integer in %d..=%d", ErrDecode, k, min, int64(MaxSafeInteger))
		}
		n = int64(f)
	} else {
		v, err := strconv.ParseInt(lit, 10, 64)
		if err != nil || v < min || v > MaxSafeInteger {
			return 0, fmt.Errorf("%w: invalid value for `%s`: expected an integer in %d..=%d", ErrDecode, k, min, int64(MaxSafeInteger))
		}
		n = v
	}
	return n, nil
}

// key decodes a required idempotency key (a BoundedString256).
func (o *object) key(k string) string {
	s := o.str(k)
	if o.err == nil {
		o.fail(boundedString(k, s))
	}
	return s
}

func (o *object) value(k string) Value {
	if o.err != nil {
		return nil
	}
	v, err := NormalizeValue(o.fields[k])
	if err != nil {
		o.fail(fmt.Errorf("%w: `%s`: %v", ErrDecode, k, err))
	}
	return v
}

// oneOf decodes a required string field that must be one of allowed;
// expected lists them for the message.
func (o *object) oneOf(k, expected string, allowed ...string) string {
	s := o.str(k)
	if o.err == nil && !slices.Contains(allowed, s) {
		o.fail(fmt.Errorf("%w: unknown variant `%s`, expected %s", ErrDecode, s, expected))
	}
	return s
}

// labels decodes update's labels: a map of BoundedString256 keys to
// BoundedString256 values, at most MaxLabels entries.
func (o *object) labels(k string) map[string]string {
	members, ok := ObjectMembers(o.raw(k))
	if !ok {
		o.fail(invalid(k, "a map"))
		return nil
	}
	labels := make(map[string]string, len(members))
	for _, m := range members {
		if o.fail(boundedString("labels key", m.Key)); o.err != nil {
			return labels
		}
		v, ok := unquote(m.Value)
		if !ok {
			o.fail(invalid("labels value", "a string"))
		} else {
			o.fail(boundedString("labels value", v))
		}
		if o.err != nil {
			return labels
		}
		labels[m.Key] = v
	}
	if len(labels) > MaxLabels {
		o.fail(fmt.Errorf("%w: `labels` must have at most %d entries", ErrDecode, MaxLabels))
	}
	return labels
}
