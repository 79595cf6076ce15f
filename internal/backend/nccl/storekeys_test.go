package nccl

import (
	"testing"
	"time"
)

// TestStoreKeysCleaned: every communicator New made left its
// exchange's keys (the unique id and one hello per rank) in the store for
// good: a long-running job that creates and closes groups grew the store
// without bound (found by review). The last rank to read them removes them.
func TestStoreKeysCleaned(t *testing.T) {
	lib := fakeLib(t)
	st := newMemStore()
	for gen := range 50 {
		c, err := New(t.Context(), Options{Timeout: time.Minute, GroupName: "g", Generation: uint64(gen), Rank: 0, Size: 1, Store: st, Lib: lib})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	st.mu.Lock()
	n := len(st.kv)
	st.mu.Unlock()
	if n != 0 {
		t.Fatalf("after 50 communicators created and closed, the store holds %d keys (want 0), e.g. %q", n, someKey(st))
	}
}

func someKey(st *memStore) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	for k := range st.kv {
		return k
	}
	return ""
}
