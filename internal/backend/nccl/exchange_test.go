package nccl

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/libnccl"
	"github.com/symmem/symmem/rendezvous"
)

// memStore is an in-process Store, for the pure-logic cases only; the
// exchange itself is also tested over the real TCP store below.
type memStore struct {
	mu   sync.Mutex
	kv   map[string][]byte
	cond chan struct{}
}

func newMemStore() *memStore { return &memStore{kv: map[string][]byte{}, cond: make(chan struct{})} }

func (m *memStore) Set(ctx context.Context, k string, v []byte) error {
	m.mu.Lock()
	m.kv[k] = append([]byte(nil), v...)
	close(m.cond)
	m.cond = make(chan struct{})
	m.mu.Unlock()
	return nil
}

func (m *memStore) Wait(ctx context.Context, keys ...string) ([][]byte, error) {
	for {
		m.mu.Lock()
		out := make([][]byte, 0, len(keys))
		for _, k := range keys {
			if v, ok := m.kv[k]; ok {
				out = append(out, v)
			}
		}
		ch := m.cond
		m.mu.Unlock()
		if len(out) == len(keys) {
			return out, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (m *memStore) Add(ctx context.Context, k string, d int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, _ := strconv.ParseInt(string(m.kv[k]), 10, 64)
	n += d
	m.kv[k] = strconv.AppendInt(nil, n, 10)
	close(m.cond)
	m.cond = make(chan struct{})
	return n, nil
}

func (m *memStore) Delete(ctx context.Context, k string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.kv, k)
	return nil
}

func fakeID(b byte) func() (libnccl.UniqueID, error) {
	return func() (libnccl.UniqueID, error) {
		var id libnccl.UniqueID
		for i := range id {
			id[i] = b + byte(i)
		}
		return id, nil
	}
}

// runExchange runs exchangeID on n ranks with the given versions.
func runExchange(t *testing.T, st func() Store, versions []int, timeout time.Duration) ([]libnccl.UniqueID, []error) {
	n := len(versions)
	ids := make([]libnccl.UniqueID, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		if versions[r] < 0 {
			continue // this rank never arrives
		}
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(t.Context(), timeout)
			defer cancel()
			ids[r], errs[r] = exchangeID(ctx, st(), "t/", r, n, versions[r], fakeID(7))
		}(r)
	}
	wg.Wait()
	return ids, errs
}

func TestExchangeID(t *testing.T) {
	srv, err := rendezvous.NewServer("127.0.0.1:0", "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tcp := func() Store {
		c, err := rendezvous.Dial(t.Context(), srv.Addr(), "tok")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	want, _ := fakeID(7)()
	t.Run("agree over tcp", func(t *testing.T) {
		ids, errs := runExchange(t, tcp, []int{22803, 22803, 22803}, 5*time.Second)
		for r := range ids {
			if errs[r] != nil || ids[r] != want {
				t.Errorf("rank %d: %v (id ok: %v)", r, errs[r], ids[r] == want)
			}
		}
	})
	mem := newMemStore()
	st := func() Store { return mem }
	t.Run("version mismatch", func(t *testing.T) {
		mem = newMemStore()
		_, got := runExchange(t, st, []int{22803, 22809}, 2*time.Second)
		for r, err := range got {
			if !errors.Is(err, errs.Mismatch) {
				t.Errorf("rank %d: %v, want errs.Mismatch", r, err)
			}
		}
	})
	t.Run("missing rank times out", func(t *testing.T) {
		mem = newMemStore()
		start := time.Now()
		_, errs := runExchange(t, st, []int{22803, -1}, 200*time.Millisecond)
		if !errors.Is(errs[0], libnccl.ErrTimeout) {
			t.Errorf("rank 0: %v, want libnccl.ErrTimeout", errs[0])
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("took %v", d)
		}
	})
	t.Run("missing rank over tcp", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err := exchangeID(ctx, tcp(), "t2/", 1, 2, 22803, fakeID(1))
		if !errors.Is(err, libnccl.ErrTimeout) {
			t.Errorf("%v, want libnccl.ErrTimeout", err)
		}
	})
	t.Run("id failure", func(t *testing.T) {
		mem = newMemStore()
		boom := errors.New("boom")
		_, err := exchangeID(t.Context(), mem, "t3/", 0, 1, 1, func() (libnccl.UniqueID, error) { return libnccl.UniqueID{}, boom })
		if !errors.Is(err, boom) {
			t.Errorf("%v", err)
		}
	})
}
