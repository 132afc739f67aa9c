package cluster

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/oecp/oecp/protocol"
)

// getAnswers holds each tenant's get result, built from the tenant's state
// record and encoded once per distinct record (so once per commit that
// changes it); every get shares it until the record changes. A record is
// recognised by its bytes, never by a version or a wake-up, so an answer
// is never stale. The cluster package owns the record's bytes and never
// changes them in place (save encodes a new blob), so the same slice is
// the same record.
type getAnswers struct {
	mu sync.Mutex
	m  map[string]*getAnswer

	emptyOnce sync.Once
	empty     *protocol.GetResult // tenants without a record
}

type getAnswer struct {
	data   []byte
	result *protocol.GetResult
}

// answer returns the shared get result of tenant's record data (found
// false: the tenant has none).
func (g *getAnswers) answer(tenant string, data []byte, found bool) (*protocol.GetResult, error) {
	if !found {
		var err error
		g.emptyOnce.Do(func() { g.empty, err = encodedGet(emptyState()) })
		return g.empty, err
	}
	g.mu.Lock()
	a := g.m[tenant]
	g.mu.Unlock()
	if a != nil && sameBytes(a.data, data) {
		return a.result, nil
	}
	st, err := decodeState(tenant, data)
	if err != nil {
		return nil, err
	}
	res, err := encodedGet(st)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	if g.m == nil {
		g.m = map[string]*getAnswer{}
	}
	g.m[tenant] = &getAnswer{data: data, result: res}
	g.mu.Unlock()
	return res, nil
}

func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0] || bytes.Equal(a, b))
}

// encodedGet is get's result for st, with its encoding stored in it.
func encodedGet(st *state) (*protocol.GetResult, error) {
	spec := json.RawMessage("null")
	if len(st.Spec) > 0 {
		spec = st.Spec
	}
	res := &protocol.GetResult{Spec: spec, Status: st.status(), AtCursor: st.cursor()}
	if st.Phase == protocol.PhaseFinished && st.Terminal != nil {
		res.TerminalResult = st.Terminal
	}
	return res, res.Encode()
}
