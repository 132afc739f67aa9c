package store

// The indexes of the memory store: committed entries by index key, and a
// transaction's changes in an overlay of the same shape where 0 marks a
// removed entry, applied by commit.

type memIndexes map[string]map[string]uint64

func (t *memTx) IndexEntry(key, entry string) (uint64, bool, error) {
	if n, ok := t.indexes[key][entry]; ok {
		return n, n != 0, nil
	}
	n, ok := t.m.indexes[key][entry]
	return n, ok, nil
}

func (t *memTx) IndexEntries(key string) ([]Indexed, error) {
	return t.indexBelow(key, MaxIndexNumber+1, -1), nil
}

func (t *memTx) IndexBelow(key string, below uint64, limit int) ([]Indexed, error) {
	if limit <= 0 {
		return nil, nil
	}
	return t.indexBelow(key, below, limit), nil
}

// indexBelow is IndexBelow; a negative limit is no limit.
func (t *memTx) indexBelow(key string, below uint64, limit int) []Indexed {
	changed := t.indexes[key]
	var out []Indexed
	for entry, n := range t.m.indexes[key] {
		if _, ok := changed[entry]; !ok && n < below {
			out = append(out, Indexed{entry, n})
		}
	}
	for entry, n := range changed {
		if n != 0 && n < below {
			out = append(out, Indexed{entry, n})
		}
	}
	sortIndexed(out)
	if limit >= 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

func (t *memTx) SetIndexEntry(key, entry string, n uint64) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := CheckIndexNumber(key, entry, n); err != nil {
		return err
	}
	if t.indexes == nil {
		t.indexes = memIndexes{}
	}
	if t.indexes[key] == nil {
		t.indexes[key] = map[string]uint64{}
	}
	t.indexes[key][entry] = n
	return nil
}

// commitIndexes applies the transaction's index changes; the caller holds
// m.mu exclusively.
func (t *memTx) commitIndexes() {
	for key, changed := range t.indexes {
		ix := t.m.indexes[key]
		if ix == nil {
			ix = map[string]uint64{}
			t.m.indexes[key] = ix
		}
		for entry, n := range changed {
			if n == 0 {
				delete(ix, entry)
			} else {
				ix[entry] = n
			}
		}
		if len(ix) == 0 {
			delete(t.m.indexes, key)
		}
	}
}
