package client_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/protocol"
)

// TestDoneIsOnlyACompleteStream: a subscription closed "done" (wrapped
// or not) is no failure; one closed for falling behind, another error or
// none is not Done.
func TestDoneIsOnlyACompleteStream(t *testing.T) {
	done := &client.ClosedError{SubscriptionID: "s1", Reason: "done"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{done, true},
		{fmt.Errorf("watch: %w", done), true},
		{&client.ClosedError{SubscriptionID: "s1", Reason: protocol.SlowConsumer}, false},
		{errors.New("done"), false},
		{nil, false},
	} {
		if got := client.Done(tc.err); got != tc.want {
			t.Errorf("Done(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
