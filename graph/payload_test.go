package graph_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/oecp/oecp/graph"
)

func pt(t testing.TB, s string) graph.PayloadType {
	t.Helper()
	p, err := graph.DecodePayloadType([]byte(s))
	if err != nil {
		t.Fatalf("payload type %s: %v", s, err)
	}
	return p
}

const recordType = `{"kind":"record","fields":{
	"b":{"type":{"kind":"boolean"},"required":true},
	"a":{"type":{"kind":"integer"},"required":true},
	"opt":{"type":{"kind":"string"},"required":false},
	"tags":{"type":{"kind":"array","items":{"kind":"enum","values":["x","y"]}},"required":false}}}`

func TestValidateMessages(t *testing.T) {
	cases := []struct {
		typ, value, want string // want "" = valid
	}{
		{`{"kind":"null"}`, `null`, ""},
		{`{"kind":"null"}`, `0`, "$ must be a null"},
		{`{"kind":"boolean"}`, `true`, ""},
		{`{"kind":"boolean"}`, `"true"`, "$ must be a boolean"},
		{`{"kind":"integer"}`, `3`, ""},
		{`{"kind":"integer"}`, `3.0`, ""},
		{`{"kind":"integer"}`, `-7`, ""},
		{`{"kind":"integer"}`, `1e3`, ""},
		{`{"kind":"integer"}`, `123456789012345678901234567890`, ""},
		{`{"kind":"integer"}`, `3.5`, "$ must be a integer"},
		{`{"kind":"integer"}`, `"3"`, "$ must be a integer"},
		{`{"kind":"number"}`, `3.5`, ""},
		{`{"kind":"number"}`, `3`, ""},
		{`{"kind":"number"}`, `1e400`, "$ must be a number"},
		{`{"kind":"number"}`, `null`, "$ must be a number"},
		{`{"kind":"string"}`, `""`, ""},
		{`{"kind":"string"}`, `1`, "$ must be a string"},
		{`{"kind":"enum","values":["a","b"]}`, `"a"`, ""},
		{`{"kind":"enum","values":["a","b"]}`, `"c"`, "$ contains unknown enum label c"},
		{`{"kind":"enum","values":["a","b"]}`, `1`, "$ must be a enum"},
		{`{"kind":"array","items":{"kind":"integer"}}`, `[]`, ""},
		{`{"kind":"array","items":{"kind":"integer"}}`, `[1,2,"x"]`, "$[2] must be a integer"},
		{`{"kind":"array","items":{"kind":"integer"}}`, `{}`, "$ must be a array"},
		{recordType, `{"a":1,"b":true}`, ""},
		{recordType, `{"a":1,"b":true,"opt":"s","tags":["x","y"]}`, ""},
		{recordType, `[]`, "$ must be a record"},
		{recordType, `{"b":true}`, "$ is missing required field a"},
		{recordType, `{}`, "$ is missing required field a"},
		{recordType, `{"a":1}`, "$ is missing required field b"},
		{recordType, `{"a":"1","b":"x"}`, "$.a must be a integer"},
		{recordType, `{"a":1,"b":true,"opt":null}`, "$.opt must be a string"},
		{recordType, `{"a":1,"b":true,"tags":["z"]}`, "$.tags[0] contains unknown enum label z"},
		{recordType, `{"a":1,"b":true,"zz":1,"extra":2}`, "$ contains undeclared field extra"},
		// Declared fields are checked before undeclared keys.
		{recordType, `{"extra":1,"a":1}`, "$ is missing required field b"},
		{`{"kind":"record","fields":{"in":{"type":{"kind":"record","fields":{}},"required":true}}}`, `{"in":{"x":1}}`, "$.in contains undeclared field x"},
		{`{"kind":"record","fields":{"n":{"type":{"kind":"null"},"required":false}}}`, `{"n":null}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.typ+" "+tc.value, func(t *testing.T) {
			err := pt(t, tc.typ).Validate(json.RawMessage(tc.value))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected: %v", err)
				}
				return
			}
			var ve *graph.ValidationError
			if !errors.As(err, &ve) || ve.Error() != tc.want {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestIsSubtype(t *testing.T) {
	const (
		null, boolean, integer, number, str = `{"kind":"null"}`, `{"kind":"boolean"}`, `{"kind":"integer"}`, `{"kind":"number"}`, `{"kind":"string"}`
		enumAB                              = `{"kind":"enum","values":["a","b"]}`
		enumA                               = `{"kind":"enum","values":["a"]}`
		arrInt                              = `{"kind":"array","items":{"kind":"integer"}}`
		arrNum                              = `{"kind":"array","items":{"kind":"number"}}`
		recReqInt                           = `{"kind":"record","fields":{"x":{"type":{"kind":"integer"},"required":true}}}`
		recReqNum                           = `{"kind":"record","fields":{"x":{"type":{"kind":"number"},"required":true}}}`
		recOptNum                           = `{"kind":"record","fields":{"x":{"type":{"kind":"number"},"required":false}}}`
		recOptInt                           = `{"kind":"record","fields":{"x":{"type":{"kind":"integer"},"required":false}}}`
		recOptStr                           = `{"kind":"record","fields":{"x":{"type":{"kind":"string"},"required":false}}}`
		recEmpty                            = `{"kind":"record","fields":{}}`
		recExtra                            = `{"kind":"record","fields":{"x":{"type":{"kind":"integer"},"required":true},"y":{"type":{"kind":"null"},"required":true}}}`
	)
	cases := []struct {
		s, t string
		want bool
	}{
		{null, null, true}, {boolean, boolean, true}, {str, str, true}, {integer, integer, true}, {number, number, true},
		{integer, number, true}, {number, integer, false}, {boolean, integer, false}, {null, str, false}, {str, enumAB, false}, {enumAB, str, false},
		{enumA, enumAB, true}, {enumAB, enumA, false}, {enumAB, enumAB, true},
		{arrInt, arrNum, true}, {arrNum, arrInt, false}, {arrInt, integer, false},
		{recReqInt, recReqNum, true}, {recReqNum, recReqInt, false},
		{recOptNum, recReqNum, false}, // required in T must be required in S
		{recEmpty, recReqNum, false},  // required T field missing
		{recEmpty, recOptNum, true},   // optional T field may be absent
		{recReqInt, recOptNum, true},  // present optional must subtype
		{recOptInt, recOptNum, true},
		{recOptStr, recOptNum, false},
		{recExtra, recReqInt, true}, // extra S fields allowed
		{recReqInt, recExtra, false},
		{recReqInt, recEmpty, true},
		{recEmpty, null, false},
	}
	for _, tc := range cases {
		if got := graph.IsSubtype(pt(t, tc.s), pt(t, tc.t)); got != tc.want {
			t.Errorf("%s <: %s = %v, want %v", tc.s, tc.t, got, tc.want)
		}
	}
}
