package main

import (
	"strings"
	"testing"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/protocol"
)

// TestStoreUnavailableSaysRetry: a refusal with STORE_UNAVAILABLE (the
// server's database is down or restarting) says the store is unavailable
// and to retry, not that the server failed internally and to check its
// log.
func TestStoreUnavailableSaysRetry(t *testing.T) {
	e := &client.Error{Code: protocol.CodeInternalError, Message: protocol.MsgInternalError, DataCode: protocol.StoreUnavailable}
	for _, cmd := range []string{"apply", "get", "run submit", "run status"} {
		why, todo := explain(cmd, e)
		if !strings.Contains(why, "store") || !strings.Contains(why, "unavailable") || !strings.HasPrefix(todo, "retry") {
			t.Errorf("oecp %s refused: %s — %s; want the store unavailable and a retry", cmd, why, todo)
		}
		if strings.Contains(why+todo, "failed internally") || strings.Contains(todo, "log") {
			t.Errorf("oecp %s refused: %s — %s; a store outage is not an internal failure", cmd, why, todo)
		}
	}
}
