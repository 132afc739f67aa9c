package protocol_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/oecp/oecp/protocol"
)

// refMembers splits a top-level object with encoding/json's decoder:
// member names unescaped, values raw, duplicates kept in order.
func refMembers(data []byte) ([]protocol.Member, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var out []protocol.Member
	for dec.More() {
		tok, err := dec.Token()
		key, isKey := tok.(string)
		if err != nil || !isKey {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, protocol.Member{Key: key, Value: v})
	}
	return out, true
}

func refString(raw []byte) (string, bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func refID(raw []byte) (protocol.ID, bool) {
	if s, ok := refString(raw); ok {
		return protocol.StringID(s), true
	}
	if len(raw) == 0 || strings.ContainsAny(string(raw), `.eE"{[tfn`) {
		return protocol.ID{}, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return protocol.ID{}, false
	}
	return protocol.IntID(n), true
}

// refOnly returns the one member of the params object named name.
func refOnly(params []byte, name string) ([]byte, bool) {
	pm, ok := refMembers(params)
	if !ok || len(pm) != 1 || pm[0].Key != name {
		return nil, false
	}
	return pm[0].Value, true
}

// refDecode is spec/01 §1.1 steps 1–4 written plainly over encoding/json,
// the reference DecodeFrame is checked against.
func refDecode(data []byte) protocol.Frame {
	if !utf8.Valid(data) || !json.Valid(data) || protocol.HasLoneSurrogate(data) {
		return protocol.Frame{Kind: protocol.FrameParseError}
	}
	members, ok := refMembers(data)
	if !ok {
		return protocol.Frame{Kind: protocol.FrameInvalid}
	}
	n := map[string]int{}
	last := map[string][]byte{}
	for _, m := range members {
		n[m.Key]++
		last[m.Key] = m.Value
	}
	jsonrpc, jsonrpcStr := refString(last["jsonrpc"])
	method, methodStr := refString(last["method"])
	notification := n["jsonrpc"] == 1 && jsonrpcStr && n["method"] == 1 && methodStr && n["params"] == 1
	if v, ok := refOnly(last["params"], "id"); ok && notification && method == protocol.MethodCancelRequest {
		if id, ok := refID(v); ok {
			return protocol.Frame{Kind: protocol.FrameCancelRequest, CancelID: id}
		}
	}
	f := protocol.Frame{Kind: protocol.FrameInvalid}
	if notification && n["id"] == 1 {
		f.AdmissionID, f.Admitted = refID(last["id"])
	}
	if v, ok := refOnly(last["params"], "subscriptionId"); ok && !f.Admitted && notification && method == protocol.MethodSubscriptionCancel {
		if sid, ok := refString(v); ok {
			return protocol.Frame{Kind: protocol.FrameSubscriptionCancel, SubscriptionID: sid}
		}
	}
	id, idOK := refID(last["id"])
	if jsonrpc != protocol.JSONRPCVersion || !methodStr || n["id"] == 0 || !idOK {
		return f
	}
	f.Kind, f.ID, f.Method = protocol.FrameRequest, id, method
	if n["params"] > 0 {
		f.Params = last["params"]
	}
	return f
}

func sameFrame(a, b protocol.Frame) bool {
	return a.Kind == b.Kind && a.Admitted == b.Admitted && a.AdmissionID.Key() == b.AdmissionID.Key() &&
		a.ID.Key() == b.ID.Key() && a.Method == b.Method && bytes.Equal(a.Params, b.Params) &&
		a.CancelID.Key() == b.CancelID.Key() && a.SubscriptionID == b.SubscriptionID
}

// FuzzDecodeFrameMatchesReference: the allocation-free decoder agrees with
// the plain one on every field of every frame.
func FuzzDecodeFrameMatchesReference(f *testing.F) {
	goldenRequests(f)
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":-9223372036854775808,"method":"get","params":{}}`,
		`{"jsonrpc":"2.0","id":9223372036854775808,"method":"get","params":{}}`,
		`{"jsonrpc":"2.0","id":-0,"method":"get","params":{}}`,
		`{"jsonrpc":"2.0","id":1e2,"method":"get","params":{}}`,
		`{"\u006aSONrpc":"2.0","j\u0073onrpc":"2.0","id":1,"m\u0065thod":"g\u0065t","params":{}}`,
		`{"jsonrpc":"2.0","method":"$\/cancelRequest","params":{"\u0069d":"x"}}`,
		`{"jsonrpc":"2.0","method":"subscription/cancel","params":{"subscriptionId":"s","subscriptionId":"t"}}`,
		` { "jsonrpc" : "2.0" , "id" : "a\"b" , "method" : "nope" , "params" : [ 1 , 2 ] } `,
		`{"jsonrpc":"2.0","id":1,"method":"get","params":{},}`,
		`{}`, `[]`, `"x"`, `{"params":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := protocol.DecodeFrame(data), refDecode(data); !sameFrame(got, want) {
			t.Fatalf("%q:\n got %+v\nwant %+v", data, got, want)
		}
	})
}

// TestDecodeFrameAllocatesNothingForAnIntegerID: decoding a request with
// an integer id and a known method allocates nothing.
func TestDecodeFrameAllocatesNothingForAnIntegerID(t *testing.T) {
	data := []byte(`{"jsonrpc":"2.0","id":12345,"method":"get","params":{}}`)
	var f protocol.Frame
	if n := testing.AllocsPerRun(100, func() { f = protocol.DecodeFrame(data) }); n != 0 {
		t.Fatalf("%v allocations per decode", n)
	}
	if f.Kind != protocol.FrameRequest || f.Method != protocol.MethodGet || !f.Admitted {
		t.Fatalf("decoded %+v", f)
	}
}
