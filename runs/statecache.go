package runs

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"sync"
)

// stateCache keeps the decoded state of runs by state record, with the
// exact bytes it was decoded from or encoded to, so that a write does not
// decode the record the previous write of the run left. A state is taken
// from it only when the record read holds those same bytes: a write by
// any other writer (another process, a rolled-back transaction, another
// store) leaves other bytes, and equal bytes decode alike. The cache
// hands out copies that share nothing a write changes in place (the
// executions are copied; their pointers are replaced, never written
// through), and keeps copies of what it is given.
//
// It keeps the states in use, not every run's: a run's writes come close
// together (admission, dispatch, settlement, finish), while a deep queue
// holds thousands of runs nobody writes for a long time, whose decoded
// states would only grow the heap the garbage collector walks. So it holds
// two generations, each bounded by the record bytes it holds: entries go
// to the young one, a hit in the old one moves the entry to the young
// one, and a full young one becomes the old one (dropping the old).
type stateCache struct {
	mu         sync.Mutex
	young, old map[string]cachedState
	size       int // the record bytes in young
}

type cachedState struct {
	data []byte
	st   *runState
}

// maxCachedStateBytes bounds the record bytes of one generation of the
// run states kept decoded in memory.
const maxCachedStateBytes = 16 << 20

var states stateCache

// checkStateCache makes every cache hit decode the record too and panic
// when the two differ (set by tests: the cached state must be exactly the
// record's decoding).
var checkStateCache bool

// get returns a copy of the state cached for key when data is the bytes
// it was cached with, and nil otherwise.
func (c *stateCache) get(key string, data []byte) *runState {
	c.mu.Lock()
	e, ok := c.young[key]
	if !ok {
		if e, ok = c.old[key]; ok {
			delete(c.old, key)
			c.keepLocked(key, e)
		}
	}
	c.mu.Unlock()
	if !ok || !bytes.Equal(e.data, data) {
		return nil
	}
	st := e.st.clone()
	if checkStateCache {
		want, err := decodeState(data)
		if err != nil || !reflect.DeepEqual(want, st) {
			panic("runs: a cached run state is not its record's decoding")
		}
	}
	return st
}

// put keeps a copy of st as the decoding of data, which the caller no
// longer changes.
func (c *stateCache) put(key string, data []byte, st *runState) {
	st = st.clone()
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.young[key]; ok {
		c.size -= len(old.data)
		delete(c.young, key)
	}
	delete(c.old, key)
	if len(data) > maxCachedStateBytes/64 {
		return // a state this big would crowd out the others
	}
	c.keepLocked(key, cachedState{data: data, st: st})
}

// keepLocked adds e to the young generation, which becomes the old one
// first when e would overfill it. c.mu is held.
func (c *stateCache) keepLocked(key string, e cachedState) {
	if c.young == nil || c.size+len(e.data) > maxCachedStateBytes {
		c.old, c.young, c.size = c.young, map[string]cachedState{}, 0
	}
	c.young[key] = e
	c.size += len(e.data)
}

// len is the number of states cached.
func (c *stateCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.young) + len(c.old)
}

// clone copies the state and its executions. An execution with no map
// indices has nil ones, as its decoding has.
func (st *runState) clone() *runState {
	c := *st
	c.Execs = slices.Clone(st.Execs)
	for i := range c.Execs {
		if len(c.Execs[i].Indices) == 0 {
			c.Execs[i].Indices = nil
		}
	}
	return &c
}

// encodeState encodes a run's state record. Embedded JSON (inputs,
// outcomes, the terminal result) is written as it is, without HTML
// escaping, so that the record decodes to the state it was encoded from.
func encodeState(st *runState) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(st); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// decodesToItself reports whether a state encoded as data decodes to the
// state it was encoded from, as far as strings go: a string that is not
// valid UTF-8 is encoded with U+FFFD escaped in its place (and a record
// holding that escape for any other reason is simply not cached).
func decodesToItself(data []byte) bool {
	return !bytes.Contains(data, []byte(`\ufffd`))
}

func decodeState(data []byte) (*runState, error) {
	st := &runState{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, err
	}
	return st, nil
}
