package runs

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"

	"github.com/oecp/oecp/runs/statecache"
)

// states keeps the decoded state of runs by state record (package
// runs/statecache), with the exact bytes it was decoded from or encoded
// to, so that a write does not decode the record the previous write of
// the run left. Its copies share nothing a write changes in place (the
// executions are copied; their pointers are replaced, never written
// through).
var states = statecache.New((*runState).clone)

// checkStateCache makes every cache hit decode the record too and panic
// when the two differ (set by tests: the cached state must be exactly the
// record's decoding).
var checkStateCache bool

// cachedState returns a copy of the state cached for key when data is
// the bytes it was cached with, and nil otherwise.
func cachedState(key string, data []byte) *runState {
	st, ok := states.Get(key, data)
	if !ok {
		return nil
	}
	if checkStateCache {
		want, err := decodeState(data)
		if err != nil || !reflect.DeepEqual(want, st) {
			panic("runs: a cached run state is not its record's decoding")
		}
	}
	return st
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
