package statecache_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/oecp/oecp/runs/statecache"
)

// value is a decoded record: its cached copies must share nothing with
// it.
type value struct{ parts []string }

func cloneValue(v *value) *value { return &value{parts: append([]string(nil), v.parts...)} }

func newCache() *statecache.Cache[*value] { return statecache.New(cloneValue) }

func record(n int) []byte { return bytes.Repeat([]byte("x"), n) }

// TestGetNeedsTheSameBytes: a value is returned only for the bytes it was
// kept with, and as a copy: changing what Put was given or what Get
// returned changes nothing cached.
func TestGetNeedsTheSameBytes(t *testing.T) {
	c := newCache()
	v := &value{parts: []string{"a"}}
	c.Put("k", []byte("one"), v)
	v.parts[0] = "changed after Put"
	got, ok := c.Get("k", []byte("one"))
	if !ok || got.parts[0] != "a" {
		t.Fatalf("get %v %v", got, ok)
	}
	got.parts[0] = "changed after Get"
	if again, ok := c.Get("k", []byte("one")); !ok || again.parts[0] != "a" {
		t.Fatalf("get after the caller changed its copy: %v %v", again, ok)
	}
	if _, ok := c.Get("k", []byte("two")); ok {
		t.Fatal("a value was returned for other bytes")
	}
	if _, ok := c.Get("other", []byte("one")); ok {
		t.Fatal("a value was returned for another key")
	}
}

// TestBoundedByBytes: each generation holds at most MaxBytes of records,
// the cache keeps no record too big to share the room, and a record
// replaced by one it does not keep is forgotten.
func TestBoundedByBytes(t *testing.T) {
	c := newCache()
	v := &value{}
	small := record(statecache.MaxBytes / 128)
	c.Put("a", small, v)
	if _, ok := c.Get("a", small); !ok || c.Size() != len(small) {
		t.Fatalf("a small record was not kept (size %d)", c.Size())
	}
	big := record(statecache.MaxBytes/64 + 1)
	c.Put("a", big, v)
	_, smallOK := c.Get("a", small)
	_, bigOK := c.Get("a", big)
	if smallOK || bigOK || c.Size() != 0 {
		t.Fatalf("a record over the bound was kept, or the one it replaced was not forgotten (size %d)", c.Size())
	}
	for i := range 200 {
		c.Put(fmt.Sprint("run", i), small, v)
		if _, ok := c.Get(fmt.Sprint("run", i), small); c.Size() > statecache.MaxBytes || !ok {
			t.Fatalf("after %d puts: %d bytes held (bound %d), or the last one not kept", i+1, c.Size(), statecache.MaxBytes)
		}
	}
}

// TestKeepsTheValuesInUse: a value read again while its generation ages
// stays cached, however many are cached after it, while values nobody
// reads are dropped within two generations.
func TestKeepsTheValuesInUse(t *testing.T) {
	c := newCache()
	v := &value{}
	data := record(statecache.MaxBytes / 128)
	c.Put("hot", data, v)
	perGeneration := statecache.MaxBytes / len(data)
	for i := range 5 * perGeneration {
		c.Put(fmt.Sprint("queued", i), data, v)
		if i%(perGeneration/2) != 0 {
			continue
		}
		if _, ok := c.Get("hot", data); !ok {
			t.Fatalf("the value in use was dropped after %d others", i+1)
		}
	}
	if _, ok := c.Get("queued0", data); ok {
		t.Errorf("a value nobody read survived five generations")
	}
	if n := c.Len(); n > 2*perGeneration {
		t.Errorf("%d values cached, over two generations of %d", n, perGeneration)
	}
}
