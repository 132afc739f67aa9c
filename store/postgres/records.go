package postgres

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oecp/oecp/store"
)

// The store.ReadTx and store.Tx methods. In a write transaction every
// record read or written is cached (see txn), so a guard decided once is
// not read again and a write needs no round trip of its own.

func (t *txn) Cluster(tenant string) (store.Cluster, bool, error) {
	if c, ok := t.clusters[tenant]; ok {
		if c == nil {
			return store.Cluster{}, false, nil
		}
		return *c, true, nil
	}
	var c store.Cluster
	var found bool
	if err := t.send("read cluster", row(&found, qCluster, []any{tenant}, &c.Version, &c.Data)); err != nil {
		return store.Cluster{}, false, err
	}
	if t.write {
		t.clusters = put(t.clusters, tenant, &c, found)
	}
	return c, found, nil
}

// put records v (or, when !found, a known absence) under k.
func put[K comparable, V any](m map[K]*V, k K, v *V, found bool) map[K]*V {
	if m == nil {
		m = map[K]*V{}
	}
	if !found {
		v = nil
	}
	m[k] = v
	return m
}

func (t *txn) Idempotency(tenant, key string) (store.Receipt, bool, error) {
	var r store.Receipt
	var found bool
	if err := t.send("read receipt", row(&found, qIdem, []any{tenant, key}, str{&r.Fingerprint}, &r.Result)); err != nil {
		return store.Receipt{}, false, err
	}
	if t.write {
		if t.receipts == nil {
			t.receipts = map[[2]string]bool{}
		}
		t.receipts[[2]string{tenant, key}] = found
	}
	return r, found, nil
}

// run returns the run as this transaction knows it (nil: no such run).
func (t *txn) run(tenant, id string) (*runEntry, error) {
	k := [2]string{tenant, id}
	if r, ok := t.runs[k]; ok {
		return r, nil
	}
	r := &runEntry{rec: store.Run{ID: id}}
	if err := t.send("read run", row(&r.exists, qRun, []any{tenant, id}, &r.rec.Seed, &r.rec.FirstSeq, &r.rec.LastSeq, &r.rec.Count, &r.rec.Tombstoned)); err != nil {
		return nil, err
	}
	if t.write {
		if t.runs == nil {
			t.runs = map[[2]string]*runEntry{}
		}
		t.runs[k] = r
	}
	return r, nil
}

func (t *txn) Run(tenant, runID string) (store.Run, bool, error) {
	r, err := t.run(tenant, runID)
	if err != nil || !r.exists {
		return store.Run{}, false, err
	}
	return r.rec, true, nil
}

func (t *txn) FirstRunAfter(tenant string, seq uint64) (store.Run, bool, error) {
	var r store.Run
	var found bool
	err := t.send("find run", row(&found, qFirstRunAfter, []any{tenant, seq}, str{&r.ID}, &r.Seed, &r.FirstSeq, &r.LastSeq, &r.Count, &r.Tombstoned))
	return r, found && err == nil, err
}

func (t *txn) Event(tenant string, seq uint64) (store.Event, bool, error) {
	ev := store.Event{Seq: seq}
	var found bool
	err := t.send("read event", row(&found, qEvent, []any{seq, tenant}, str{&ev.RunID}, &ev.Index, &ev.Body))
	return ev, found && err == nil, err
}

func (t *txn) Events(tenant, runID string, afterSeq uint64, limit int) ([]store.Event, error) {
	if limit <= 0 {
		return nil, nil
	}
	var out []store.Event
	scan := func(rows pgx.Rows) error {
		for rows.Next() {
			ev := store.Event{RunID: runID}
			if err := rows.Scan(&ev.Seq, &ev.Index, &ev.Body); err != nil {
				return err
			}
			out = append(out, ev)
		}
		return nil
	}
	if err := t.send("read events", query{sql: qEvents, args: []any{tenant, runID, afterSeq, limit}, scan: scan}); err != nil {
		return nil, err
	}
	return out, nil
}

func (t *txn) LastSeq() (uint64, error) {
	if t.write {
		// The transaction holds the sequence row: its value is t.seq.
		if !t.begun {
			if err := t.send("read sequence"); err != nil {
				return 0, err
			}
		}
		return t.seq, nil
	}
	var last uint64
	var found bool
	err := t.send("read sequence", row(&found, readSeq, nil, &last))
	return last, err
}

func (t *txn) PutCluster(tenant string, c store.Cluster) error {
	if err := t.writable(); err != nil {
		return err
	}
	cur, found, err := t.Cluster(tenant)
	if err != nil {
		return err
	}
	if c.Version != cur.Version+1 {
		return fmt.Errorf("%w: tenant %q has version %d, put %d", store.ErrVersionConflict, tenant, cur.Version, c.Version)
	}
	if found {
		t.queue(qUpdateCluster, c.Version, c.Data, tenant, cur.Version)
	} else {
		t.queue(qInsertCluster, tenant, c.Data)
	}
	c.Data = append([]byte(nil), c.Data...)
	t.clusters[tenant] = &c
	return nil
}

func (t *txn) PutIdempotency(tenant, key string, r store.Receipt) error {
	if err := t.writable(); err != nil {
		return err
	}
	k := [2]string{tenant, key}
	present, known := t.receipts[k]
	if !known {
		var err error
		if _, present, err = t.Idempotency(tenant, key); err != nil {
			return err
		}
	}
	if present {
		return fmt.Errorf("%w: idempotency key %q", store.ErrExists, key)
	}
	t.queue(qInsertIdem, tenant, key, r.Fingerprint, r.Result)
	t.receipts[k] = true
	return nil
}

// existingRun is runToWrite of a run that must exist (else ErrNoRun).
func (t *txn) existingRun(tenant, id string) (*runEntry, error) {
	r, err := t.runToWrite(tenant, id)
	if err == nil && !r.exists {
		err = fmt.Errorf("%w: %q", store.ErrNoRun, id)
	}
	return r, err
}

// runToWrite is run in a write transaction.
func (t *txn) runToWrite(tenant, id string) (*runEntry, error) {
	if err := t.writable(); err != nil {
		return nil, err
	}
	return t.run(tenant, id)
}

func (t *txn) CreateRun(tenant string, r store.Run) error {
	cur, err := t.runToWrite(tenant, r.ID)
	if err != nil {
		return err
	}
	if cur.exists {
		return fmt.Errorf("%w: run %q", store.ErrExists, r.ID)
	}
	t.queue(qInsertRun, tenant, r.ID, r.Seed)
	*cur = runEntry{rec: store.Run{ID: r.ID, Seed: append([]byte(nil), r.Seed...)}, exists: true}
	return nil
}

func (t *txn) AppendEvent(tenant, runID string, encode func(seq uint64) ([]byte, error)) (store.Event, error) {
	r, err := t.runToWrite(tenant, runID)
	if err != nil {
		return store.Event{}, err
	}
	// The first round trip (in runToWrite at the latest) read t.seq.
	seq := t.seq + 1
	ev, err := store.NewEvent(r.rec, r.exists, seq, encode)
	if err != nil {
		return store.Event{}, err
	}
	t.queue(qInsertEvent, seq, tenant, runID, ev.Index, ev.Body)
	if r.rec.Count == 0 {
		r.rec.FirstSeq = seq
	}
	if !r.dirty {
		t.dirtyRuns = append(t.dirtyRuns, dirtyRun{[2]string{tenant, runID}, r})
	}
	r.rec.LastSeq, r.rec.Count, r.dirty = seq, ev.Index, true
	t.seq, t.seqMoved = seq, true
	return ev, nil
}

func (t *txn) TombstoneRun(tenant, runID string) error {
	r, err := t.existingRun(tenant, runID)
	if err != nil {
		return err
	}
	t.queue(qTombstone, tenant, runID)
	t.queue(qDropEvents, tenant, runID)
	r.rec.Tombstoned = true
	return nil
}

func (t *txn) NextCounter(name string) (uint64, error) {
	if err := t.writable(); err != nil {
		return 0, err
	}
	var v uint64
	var found bool
	if err := t.send("next counter", row(&found, qNextCounter, []any{name}, &v)); err != nil {
		return 0, err
	}
	t.dirty = true
	return v, nil
}

// Lease reads a lease row. A write transaction locks it (FOR SHARE) so
// that a takeover waits for the transaction's commit: a CheckLease inside
// Update stays true until the commit.
func (t *txn) Lease(name string) (store.Lease, bool, error) {
	q := qLease
	if t.write {
		q = qLeaseShare
	}
	l := store.Lease{Name: name}
	var found bool
	if err := t.send("read lease", row(&found, q, []any{name}, str{&l.Owner}, &l.Epoch)); err != nil || !found {
		return store.Lease{}, false, err
	}
	return l, true, nil
}

var (
	_ store.Tx          = (*txn)(nil)
	_ store.LeaseReader = (*txn)(nil)
)
