package protocol_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oecp/oecp/protocol"
)

func TestAppendStringEscapesLikeTheReference(t *testing.T) {
	cases := map[string]string{
		"plain":        `"plain"`,
		`q"b\`:         `"q\"b\\"`,
		"\b\f\n\r\t":   `"\b\f\n\r\t"`,
		"\x00\x01\x1f": `"\u0000\u0001\u001f"`,
		"\x7f":         "\"\x7f\"",
		"<>&":          `"<>&"`,
		"\u2028\u2029": "\"\u2028\u2029\"",
		"héllo ✓":      `"héllo ✓"`,
		"bad\xffutf8":  "\"bad\ufffdutf8\"",
	}
	for in, want := range cases {
		if got := string(protocol.AppendString(nil, in)); got != want {
			t.Errorf("%q: got %s want %s", in, got, want)
		}
	}
}

func TestMarshalWritesHTMLAndLineSeparatorsRaw(t *testing.T) {
	v := map[string]string{"a": "<b>&\u2028\u2029", "b": `\u2028`}
	got, err := protocol.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"a\":\"<b>&\u2028\u2029\",\"b\":\"\\\\u2028\"}"
	if string(got) != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

func TestNormalizeValueSortsKeysAndFormatsNumbersLikeSerde(t *testing.T) {
	cases := map[string]string{
		`{"b":1,"a":{"d":[1,2.5,{"z":null,"y":true}],"c":"x"}}`: `{"a":{"c":"x","d":[1,2.5,{"y":true,"z":null}]},"b":1}`,
		`{"a":1,"a":2}`:        `{"a":2}`,
		`1.0`:                  `1.0`,
		`100`:                  `100`,
		`1e3`:                  `1000.0`,
		`1e21`:                 `1e21`,
		`1.5e-7`:               `1.5e-7`,
		`0.0001`:               `0.0001`,
		`0.00001`:              `0.00001`,
		`0.000001`:             `1e-6`,
		`123456789012345678`:   `123456789012345678`,
		`18446744073709551615`: `18446744073709551615`,
		`18446744073709551616`: `1.8446744073709552e19`,
		`-9223372036854775808`: `-9223372036854775808`,
		`1e16`:                 `1e16`,
		`1234567890123456.0`:   `1234567890123456.0`,
		`-2.5`:                 `-2.5`,
		` [ ] `:                `[]`,
		`"\u003c"`:             `"<"`,
	}
	for in, want := range cases {
		got, err := protocol.NormalizeValue([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if string(got) != want {
			t.Errorf("%s: got %s want %s", in, got, want)
		}
	}
	for _, bad := range []string{``, `{`, `[1,]`, `1 2`, `nul`} {
		if _, err := protocol.NormalizeValue([]byte(bad)); err == nil {
			t.Errorf("%q: want error", bad)
		}
	}
}

func TestDecodeFrameClassification(t *testing.T) {
	cases := []struct {
		in         string
		kind       protocol.FrameKind
		classified bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"get","params":{}}`, protocol.FrameRequest, true},
		{`{"jsonrpc":"2.0","id":1,"method":"get"}`, protocol.FrameRequest, false},
		{`{"jsonrpc":"1.0","id":1,"method":"get","params":{}}`, protocol.FrameInvalid, true},
		{`{"jsonrpc":"2.0","id":1,"id":2,"method":"get","params":{}}`, protocol.FrameRequest, false},
		{`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"a"}}`, protocol.FrameCancelRequest, false},
		{`{"jsonrpc":"x","id":9,"method":"$/cancelRequest","params":{"id":3}}`, protocol.FrameCancelRequest, false},
		{`{"jsonrpc":"2.0","method":"subscription/cancel","params":{"subscriptionId":"s"}}`, protocol.FrameSubscriptionCancel, false},
		{`{"jsonrpc":"2.0","id":1,"method":"subscription/cancel","params":{"subscriptionId":"s"}}`, protocol.FrameRequest, true},
		{`{"jsonrpc":"2.0","method":"subscription/cancel","params":{"subscriptionId":"s","x":1}}`, protocol.FrameInvalid, false},
		{`{"jsonrpc":"2.0","method":"subscription/cancel","params":{"subscriptionId":1}}`, protocol.FrameInvalid, false},
		{`{bad`, protocol.FrameParseError, false},
	}
	for _, c := range cases {
		f := protocol.DecodeFrame([]byte(c.in))
		if f.Kind != c.kind || f.Classified() != c.classified {
			t.Errorf("%s: kind %d classified %v", c.in, f.Kind, f.Classified())
		}
	}
}

func TestMethodRegistryIsTheProtocolSurface(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "oecp-v1", "openrpc.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Methods []struct{ Name string } `json:"methods"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Methods) != len(protocol.Methods) {
		t.Fatalf("openrpc has %d methods, registry %d", len(doc.Methods), len(protocol.Methods))
	}
	subs := 0
	for i, m := range doc.Methods {
		if protocol.Methods[i].Name != m.Name {
			t.Errorf("method %d: %s vs %s", i, protocol.Methods[i].Name, m.Name)
		}
		if protocol.Methods[i].Kind == protocol.Subscription {
			subs++
		}
	}
	if subs != 6 {
		t.Fatalf("%d subscription methods, want 6", subs)
	}
}

func TestParamsAreClosedAndNullRulesHold(t *testing.T) {
	bad := map[string]string{
		"update":   `{"ifGeneration":1,"idempotencyKey":"k","labels":null}`,
		"update2":  `{"ifGeneration":1,"idempotencyKey":"k"}`,
		"update3":  `{"ifGeneration":1,"idempotencyKey":"k","graph":{}}`,
		"update4":  `{"ifGeneration":1.5,"idempotencyKey":"k","suspended":true}`,
		"update5":  `{"ifGeneration":1,"idempotencyKey":"","suspended":true}`,
		"update6":  `{"ifGeneration":1,"idempotencyKey":"k\u0001","suspended":true}`,
		"update7":  `{"ifGeneration":-1,"idempotencyKey":"k","suspended":true}`,
		"update8":  `{"ifGeneration":9007199254740992,"idempotencyKey":"k","suspended":true}`,
		"update9":  `{"ifGeneration":1,"idempotencyKey":"k","logLevel":"loud"}`,
		"stop":     `{"mode":"later","ifGeneration":1,"idempotencyKey":"k"}`,
		"retry":    `{"ifGeneration":1,"idempotencyKey":"k","turnId":"t"}`,
		"resubmit": `{"ifGeneration":1,"idempotencyKey":"k"}`,
		"delete":   `{"ifGeneration":1,"idempotencyKey":"k","provider":"x"}`,
	}
	for name, in := range bad {
		var err error
		switch strings.TrimRight(name, "0123456789") {
		case "update":
			_, err = protocol.DecodeUpdate([]byte(in))
		case "stop":
			_, err = protocol.DecodeStop([]byte(in))
		case "retry":
			_, err = protocol.DecodeRetry([]byte(in))
		case "resubmit":
			_, err = protocol.DecodeResubmit([]byte(in))
		case "delete":
			_, err = protocol.DecodeDelete([]byte(in))
		}
		if err == nil {
			t.Errorf("%s: %s accepted", name, in)
		}
	}
	u, err := protocol.DecodeUpdate([]byte(`{"ifGeneration":7.0,"idempotencyKey":"k","labels":{"a":"1","a":"2"}}`))
	if err != nil || u.IfGeneration != 7 || u.Labels["a"] != "2" {
		t.Fatalf("%+v %v", u, err)
	}
	a, err := protocol.DecodeApply([]byte(`{"graph":{},"input":null}`))
	if err != nil || !a.HasInput || !a.Input.IsNull() {
		t.Fatalf("%+v %v", a, err)
	}
	a, err = protocol.DecodeApply([]byte(`{"graph":{}}`))
	if err != nil || a.HasInput {
		t.Fatalf("%+v %v", a, err)
	}
	d, err := protocol.DecodeDelete([]byte(`{"ifGeneration":0,"idempotencyKey":"k","ifRunId":null}`))
	if err != nil || d.IfRunID != nil {
		t.Fatalf("%+v %v", d, err)
	}
}
