package harness_test

import (
	"slices"
	"testing"

	"github.com/oecp/oecp/engine/harness"
)

// TestGatewayPorts: the ports of the entries' loopback baseUrls, once
// each, a missing port read from the scheme; a remote gateway is not one.
func TestGatewayPorts(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []int
	}{
		{`{"codex": {"baseUrl": "http://127.0.0.1:4000/v1"}, "claude": {"baseUrl": "http://localhost:4000"}}`, []int{4000}},
		{`{"codex": {"baseUrl": "https://[::1]/v1"}, "claude": {"baseUrl": "http://127.0.0.2:8080"}}`, []int{443, 8080}},
		{`{"codex": {"baseUrl": "https://gateway.example:4000/v1"}, "claude": {}}`, nil},
	} {
		c, err := harness.Parse("harness.json", []byte(tc.file))
		if err != nil {
			t.Fatal(err)
		}
		got := c.GatewayPorts()
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: gateway ports %v, want %v", tc.file, got, tc.want)
		}
	}
}
