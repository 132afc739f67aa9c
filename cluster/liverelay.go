package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
	"sync"

	"github.com/oecp/oecp/internal/numbered"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// Live streams across replicas. On a store shared by several replicas
// (store.Broadcaster) every logs record and agent/attach event this
// process publishes is also broadcast, numbered by this process; another
// replica publishes it to its own subscribers (and registers, for
// agent/attach, the executions it hears start), so a client on any
// replica follows the cluster's live output. A gap in a sender's numbers
// (a message dropped on the way) closes every live subscriber of the
// receiving replica with SLOW_CONSUMER, as falling behind does: no one
// misses a line without being told.

// liveTopic is the broadcast topic of the clusters' live streams.
const liveTopic = "clusterlive"

// Kinds of live message.
const (
	liveLog   = "log"
	liveStart = "start"
	liveEvent = "event"
	liveEnd   = "end"
)

// liveMsg is the body of one broadcast live item: Rest is its encoded
// notification tail.
type liveMsg struct {
	Kind      string `json:"k"`
	Tenant    string `json:"t"`
	Execution string `json:"x,omitempty"`
	Rest      string `json:"r,omitempty"`
}

// liveRelay is the backend's side of live streams across replicas: the
// items this process sends are one numbered stream of the channel, named
// by a random origin.
type liveRelay struct {
	ch     *numbered.Channel // nil: no other replicas
	origin string

	mu   sync.Mutex
	last map[string]*numbered.Last // the numbers received, by origin
}

// newLiveRelay starts b's relay when its store has other replicas.
func newLiveRelay(st store.Store, b *Backend) *liveRelay {
	r := &liveRelay{last: map[string]*numbered.Last{}}
	var id [8]byte
	_, _ = rand.Read(id[:])
	r.origin = hex.EncodeToString(id[:])
	r.ch = numbered.Open(st, liveTopic, func(m numbered.Msg) { r.received(b, m) })
	return r
}

// send broadcasts one live item this process published.
func (r *liveRelay) send(kind, tenant, execution string, rest []byte) {
	if r.ch == nil {
		return
	}
	body, err := json.Marshal(liveMsg{Kind: kind, Tenant: tenant, Execution: execution, Rest: string(rest)})
	if err == nil {
		r.ch.Send(r.origin, body, false)
	}
}

// received publishes another replica's live item to this replica's
// subscribers.
func (r *liveRelay) received(b *Backend, msg numbered.Msg) {
	var m liveMsg
	if json.Unmarshal(msg.Body, &m) != nil {
		return
	}
	r.mu.Lock()
	last := r.last[msg.Stream]
	if last == nil {
		last = &numbered.Last{}
		r.last[msg.Stream] = last
	}
	broken := last.Take(msg.Seq).Broken()
	r.mu.Unlock()
	h := b.live
	h.mu.Lock()
	defer h.mu.Unlock()
	if broken {
		h.overflowAll()
	}
	key := m.Tenant + "\x00" + m.Execution
	switch m.Kind {
	case liveLog:
		h.publish(h.logs[m.Tenant], []byte(m.Rest))
	case liveStart:
		if e, ok := h.execs[key]; ok {
			e.active = true
		} else {
			h.execs[key] = &execState{active: true, subs: map[*liveSub]struct{}{}}
		}
	case liveEvent:
		if e, ok := h.execs[key]; ok && e.active {
			h.publish(e.subs, []byte(m.Rest))
		}
	case liveEnd:
		// An end of an execution never heard of is kept too: an attach
		// that found it open in the store just before must not follow it.
		if e, ok := h.execs[key]; ok {
			e.active = false
			h.endAll(e.subs)
		} else {
			h.execs[key] = &execState{subs: map[*liveSub]struct{}{}}
		}
	}
}

// knows reports whether the hub has heard of a tenant's execution.
func (h *liveHub) knows(tenant, execution string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.execs[tenant+"\x00"+execution]
	return ok
}

// execFound is what the store says of an execution.
type execFound int

const (
	execUnknown execFound = iota // no such execution of the tenant
	execOpen                     // dispatched and not ended
	execEnded                    // dispatched and ended
)

// findExecution looks a tenant's execution up in the store: open in its
// current run, or ended in the execution log of the run it belongs to.
func (b *Backend) findExecution(ctx context.Context, tenant, ref string) (execFound, error) {
	found := execUnknown
	err := b.store.View(ctx, func(tx store.ReadTx) error {
		st, _, err := load(tx, tenant)
		if err != nil {
			return err
		}
		for i := range st.Execs {
			if e := &st.Execs[i]; e.Ref == ref {
				found = execEnded
				if e.End == 0 && st.Phase == protocol.PhaseRunning {
					found = execOpen
				}
				return nil
			}
		}
		for _, run := range st.Runs {
			if run != st.RunID && !strings.HasPrefix(ref, run+"/") {
				continue
			}
			if ok, err := inLog(tx, run, ref); ok || err != nil {
				if ok {
					found = execEnded
				}
				return err
			}
		}
		return nil
	})
	return found, err
}

// inLog reports whether run's execution log holds ref.
func inLog(tx store.ReadTx, run, ref string) (bool, error) {
	for k := uint64(0); ; k++ {
		recs, _, err := readChunk(tx, run, k)
		if err != nil || recs == nil {
			return false, err
		}
		for i := range recs {
			if recs[i].Ref == ref {
				return true, nil
			}
		}
	}
}

// overflowAll closes every live subscriber with SLOW_CONSUMER; the caller
// holds h.mu.
func (h *liveHub) overflowAll() {
	sets := []map[*liveSub]struct{}{}
	for _, set := range h.logs {
		sets = append(sets, set)
	}
	for _, e := range h.execs {
		sets = append(sets, e.subs)
	}
	for _, set := range sets {
		for s := range set {
			s.overflowed = true
			delete(set, s)
			close(s.ch)
		}
	}
}
