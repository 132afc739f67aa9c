package store

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// NewMemory returns an in-memory Store. Update transactions are serialized
// by one mutex and buffer their writes, so a failed transaction leaves no
// trace; View runs under a shared lock. It is the store of the fixture
// backend and of tests.
func NewMemory() Store {
	return &memory{
		clusters: map[string]Cluster{},
		idem:     map[tkey]Receipt{},
		runs:     map[tkey]*runEntry{},
		tenants:  map[string][]*runEntry{},
		bySeq:    map[uint64]*runEntry{},
		counters: map[string]uint64{},
		indexes:  memIndexes{},
		changed:  make(chan struct{}),
	}
}

type tkey struct{ tenant, key string }

type runEntry struct {
	tenant string
	rec    Run
	events []Event
	// evidence is the run's agent evidence (memory_evidence.go).
	evidence []EvidenceRecord
	// checkpoint is the run's checkpoint bundle (memory_checkpoint.go).
	checkpoint []byte
	// state is the run's state record, version 0 when none
	// (memory_runstate.go).
	state Record
}

type memory struct {
	// wmu serializes writers so that a transaction's reads and its commit
	// see no interleaved writer; mu guards the data for readers.
	wmu sync.Mutex
	mu  sync.RWMutex

	closed   bool
	clusters map[string]Cluster
	idem     map[tkey]Receipt
	runs     map[tkey]*runEntry
	tenants  map[string][]*runEntry // creation order
	bySeq    map[uint64]*runEntry
	counters map[string]uint64
	indexes  memIndexes // memory_index.go
	seq      uint64
	changed  chan struct{}
	obs      Observer // set before use; nil: none
	// evidenceID is the last evidence ID assigned (memory_evidence.go).
	evidenceID uint64
}

func (m *memory) Update(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.wmu.Lock()
	defer m.wmu.Unlock()
	start := time.Now()
	m.mu.RLock()
	closed := m.closed
	m.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	tx := &memTx{m: m}
	// Readers may run concurrently with fn: wmu keeps other writers out and
	// fn only reads the committed data, which cannot change under it.
	m.mu.RLock()
	err := fn(tx)
	m.mu.RUnlock()
	if err != nil {
		return err
	}
	if !tx.dirty() {
		return nil
	}
	m.mu.Lock()
	tx.commit()
	ch := m.changed
	m.changed = make(chan struct{})
	m.mu.Unlock()
	close(ch)
	if m.obs != nil {
		m.obs.Commit(time.Since(start), false)
	}
	return nil
}

func (m *memory) View(ctx context.Context, fn func(ReadTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return ErrClosed
	}
	return fn(&memTx{m: m, readOnly: true})
}

func (m *memory) Changed() <-chan struct{} {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.changed
}

func (m *memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// memTx is a transaction: committed data plus buffered writes. The caller
// holds m.mu (shared) while it is used.
type memTx struct {
	m        *memory
	readOnly bool

	clusters   map[string]Cluster
	idem       map[tkey]Receipt
	newRuns    []*runEntry        // created in this tx, in order
	runs       map[tkey]*runEntry // overlay copies of touched runs (new or existing)
	events     []pendingEvent
	tombstones map[tkey]bool
	counters   map[string]uint64
	indexes    memIndexes  // index changes (memory_index.go)
	seq        uint64      // last sequence assigned in this tx (0: none)
	deletes    *memDeletes // memory_prune.go
	// checkpoints are the bundles put in this tx (memory_checkpoint.go).
	checkpoints map[tkey][]byte
	// states are the run state records put in this tx
	// (memory_runstate.go).
	states map[tkey]Record
}

type pendingEvent struct {
	key tkey
	ev  Event
}

func (t *memTx) dirty() bool {
	return len(t.clusters) > 0 || len(t.idem) > 0 || len(t.runs) > 0 || len(t.counters) > 0 || len(t.indexes) > 0 || t.deletes != nil || len(t.checkpoints) > 0 || len(t.states) > 0
}

func (t *memTx) Cluster(tenant string) (Cluster, bool, error) {
	if c, ok := t.clusters[tenant]; ok {
		return c, true, nil
	}
	c, ok := t.m.clusters[tenant]
	return c, ok, nil
}

func (t *memTx) Idempotency(tenant, key string) (Receipt, bool, error) {
	k := tkey{tenant, key}
	if r, ok := t.idem[k]; ok {
		return r, true, nil
	}
	r, ok := t.m.idem[k]
	return r, ok, nil
}

// run returns the current view of a run record.
func (t *memTx) run(k tkey) (*runEntry, bool) {
	if t.deleted(k) {
		return nil, false
	}
	if e, ok := t.runs[k]; ok {
		return e, true
	}
	e, ok := t.m.runs[k]
	return e, ok
}

func (t *memTx) Run(tenant, runID string) (Run, bool, error) {
	e, ok := t.run(tkey{tenant, runID})
	if !ok {
		return Run{}, false, nil
	}
	return e.rec, true, nil
}

func (t *memTx) FirstRunAfter(tenant string, seq uint64) (Run, bool, error) {
	var best *Run
	consider := func(e *runEntry) {
		r := e.rec
		if t.deleted(tkey{tenant, r.ID}) {
			return
		}
		if cur, ok := t.runs[tkey{tenant, r.ID}]; ok {
			r = cur.rec
		}
		if r.Count == 0 || r.FirstSeq <= seq {
			return
		}
		if best == nil || r.FirstSeq < best.FirstSeq {
			best = &r
		}
	}
	for _, e := range t.m.tenants[tenant] {
		consider(e)
	}
	for _, e := range t.newRuns {
		if e.tenant == tenant {
			consider(e)
		}
	}
	if best == nil {
		return Run{}, false, nil
	}
	return *best, true, nil
}

func (t *memTx) Event(tenant string, seq uint64) (Event, bool, error) {
	for _, p := range t.events {
		if p.ev.Seq == seq && p.key.tenant == tenant && !t.tombstones[p.key] && !t.deleted(p.key) {
			return p.ev, true, nil
		}
	}
	e, ok := t.m.bySeq[seq]
	if !ok || e.tenant != tenant || t.tombstones[tkey{tenant, e.rec.ID}] || t.deleted(tkey{tenant, e.rec.ID}) {
		return Event{}, false, nil
	}
	i := sort.Search(len(e.events), func(i int) bool { return e.events[i].Seq >= seq })
	if i == len(e.events) || e.events[i].Seq != seq {
		return Event{}, false, nil
	}
	return e.events[i], true, nil
}

func (t *memTx) Events(tenant, runID string, afterSeq uint64, limit int) ([]Event, error) {
	k := tkey{tenant, runID}
	if limit <= 0 || t.tombstones[k] || t.deleted(k) {
		return nil, nil
	}
	var out []Event
	if e, ok := t.m.runs[k]; ok && !e.rec.Tombstoned {
		evs := e.events
		i := sort.Search(len(evs), func(i int) bool { return evs[i].Seq > afterSeq })
		n := min(len(evs)-i, limit)
		if n > 0 {
			out = make([]Event, n, n)
			copy(out, evs[i:i+n])
		}
	}
	for _, p := range t.events {
		if len(out) >= limit {
			break
		}
		if p.key == k && p.ev.Seq > afterSeq {
			out = append(out, p.ev)
		}
	}
	return out, nil
}

func (t *memTx) LastSeq() (uint64, error) {
	if t.seq != 0 {
		return t.seq, nil
	}
	return t.m.seq, nil
}

func (t *memTx) writable() error {
	if t.readOnly {
		return ErrReadOnly
	}
	return nil
}

func (t *memTx) PutCluster(tenant string, c Cluster) error {
	if err := t.writable(); err != nil {
		return err
	}
	cur, _, _ := t.Cluster(tenant)
	if c.Version != cur.Version+1 {
		return fmt.Errorf("%w: tenant %q has version %d, put %d", ErrVersionConflict, tenant, cur.Version, c.Version)
	}
	if t.clusters == nil {
		t.clusters = map[string]Cluster{}
	}
	c.Data = append([]byte(nil), c.Data...)
	t.clusters[tenant] = c
	return nil
}

func (t *memTx) PutIdempotency(tenant, key string, r Receipt) error {
	if err := t.writable(); err != nil {
		return err
	}
	if _, ok, _ := t.Idempotency(tenant, key); ok {
		return fmt.Errorf("%w: idempotency key %q", ErrExists, key)
	}
	if t.idem == nil {
		t.idem = map[tkey]Receipt{}
	}
	r.Result = append([]byte(nil), r.Result...)
	t.idem[tkey{tenant, key}] = r
	return nil
}

// touch returns the overlay copy of run k, copying it from the committed
// data on first use.
func (t *memTx) touch(k tkey) (*runEntry, bool) {
	if t.deleted(k) {
		return nil, false
	}
	if e, ok := t.runs[k]; ok {
		return e, true
	}
	e, ok := t.m.runs[k]
	if !ok {
		return nil, false
	}
	cp := &runEntry{tenant: e.tenant, rec: e.rec}
	if t.runs == nil {
		t.runs = map[tkey]*runEntry{}
	}
	t.runs[k] = cp
	return cp, true
}

func (t *memTx) CreateRun(tenant string, r Run) error {
	if err := t.writable(); err != nil {
		return err
	}
	k := tkey{tenant, r.ID}
	if t.deleted(k) {
		// The commit applies deletions last: the new run would go with
		// the old one.
		return fmt.Errorf("store: run %q is deleted in this transaction: create it again in the next one", r.ID)
	}
	if _, ok := t.run(k); ok {
		return fmt.Errorf("%w: run %q", ErrExists, r.ID)
	}
	r.FirstSeq, r.LastSeq, r.Count, r.Tombstoned = 0, 0, 0, false
	r.Seed = append([]byte(nil), r.Seed...)
	e := &runEntry{tenant: tenant, rec: r}
	if t.runs == nil {
		t.runs = map[tkey]*runEntry{}
	}
	t.runs[k] = e
	t.newRuns = append(t.newRuns, e)
	return nil
}

func (t *memTx) AppendEvent(tenant, runID string, encode func(seq uint64) ([]byte, error)) (Event, error) {
	if err := t.writable(); err != nil {
		return Event{}, err
	}
	k := tkey{tenant, runID}
	e, ok := t.touch(k)
	if !ok {
		return Event{}, fmt.Errorf("%w: %q", ErrNoRun, runID)
	}
	if e.rec.Tombstoned {
		return Event{}, fmt.Errorf("%w: %q", ErrTombstoned, runID)
	}
	last, _ := t.LastSeq()
	seq := last + 1
	body, err := encode(seq)
	if err != nil {
		return Event{}, err
	}
	ev := Event{Seq: seq, RunID: runID, Index: e.rec.Count + 1, Body: body}
	t.seq = seq
	if e.rec.Count == 0 {
		e.rec.FirstSeq = seq
	}
	e.rec.LastSeq = seq
	e.rec.Count++
	t.events = append(t.events, pendingEvent{key: k, ev: ev})
	return ev, nil
}

func (t *memTx) TombstoneRun(tenant, runID string) error {
	if err := t.writable(); err != nil {
		return err
	}
	k := tkey{tenant, runID}
	e, ok := t.touch(k)
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoRun, runID)
	}
	e.rec.Tombstoned = true
	if t.tombstones == nil {
		t.tombstones = map[tkey]bool{}
	}
	t.tombstones[k] = true
	return nil
}

func (t *memTx) NextCounter(name string) (uint64, error) {
	if err := t.writable(); err != nil {
		return 0, err
	}
	if t.counters == nil {
		t.counters = map[string]uint64{}
	}
	v, ok := t.counters[name]
	if !ok {
		v = t.m.counters[name]
	}
	v++
	t.counters[name] = v
	return v, nil
}

// commit applies the buffered writes; the caller holds m.mu exclusively.
func (t *memTx) commit() {
	m := t.m
	for k, c := range t.clusters {
		m.clusters[k] = c
	}
	for k, r := range t.idem {
		m.idem[k] = r
	}
	for k, e := range t.runs {
		base, ok := m.runs[k]
		if !ok {
			base = &runEntry{tenant: e.tenant}
			m.runs[k] = base
			m.tenants[e.tenant] = append(m.tenants[e.tenant], base)
		}
		base.rec = e.rec
	}
	for _, p := range t.events {
		base := m.runs[p.key]
		// Copy on append: readers may hold the old slice header.
		base.events = append(base.events, p.ev)
		m.bySeq[p.ev.Seq] = base
	}
	for k := range t.tombstones {
		base := m.runs[k]
		for _, ev := range base.events {
			delete(m.bySeq, ev.Seq)
		}
		base.events = nil
	}
	for k, v := range t.counters {
		m.counters[k] = v
	}
	if t.seq > m.seq {
		m.seq = t.seq
	}
	t.commitCheckpoints()
	t.commitStates()
	t.commitIndexes()
	t.commitDeletes()
}
