package main

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/coll"
)

// world is a live symmem.World and the handles created from it.
type world struct {
	w     *symmem.World
	id    uint64
	group uint64 // the world group's handle

	mu      sync.Mutex
	owned   []uint64 // group and scope handles to drop with the world
	dropped bool     // drop ran: own refuses new handles

	// close serializes symmem_world_close of this world, as scope.end
	// does for scopes: the loser of a race finds the handle gone.
	close sync.Mutex
}

// group is a symmem.Group and the path its last collective took.
type group struct {
	w *world
	g *symmem.Group

	mu   sync.Mutex
	last coll.Path

	// close serializes symmem_group_close of this group (see world.close).
	close sync.Mutex
}

type scope struct {
	g *group
	s *symmem.Scope
	// end serializes symmem_scope_end of this scope: a thread that loses a
	// race to end it then finds the handle gone, as a second end in
	// sequence does, instead of the pool's "ended twice".
	end sync.Mutex
}

// table maps handles to objects. Handles start at 1 and are never reused,
// so a stale handle fails instead of reaching another object.
type table struct {
	mu   sync.RWMutex
	next uint64
	m    map[uint64]any
}

var (
	handles = table{m: map[uint64]any{}}
	// current is the world the PyTorch allocator hooks use: the most
	// recently initialised one still open (worlds.close falls back to an
	// older one). An atomic, so the hooks read it without a lock.
	current atomic.Pointer[world]
	worlds  openWorlds
)

// openWorlds lists the open worlds, oldest first, to point current at the
// newest remaining one when a world closes.
type openWorlds struct {
	mu   sync.Mutex
	list []*world
}

func (o *openWorlds) open(w *world) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.list = append(o.list, w)
	current.Store(w)
}

func (o *openWorlds) close(w *world) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, x := range o.list {
		if x == w {
			o.list = append(o.list[:i], o.list[i+1:]...)
			break
		}
	}
	var newest *world
	if n := len(o.list); n > 0 {
		newest = o.list[n-1]
	}
	current.Store(newest)
}

func (t *table) add(v any) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	t.m[t.next] = v
	return t.next
}

func (t *table) remove(h uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, h)
}

// lookup returns the object of handle h if it is a T.
func lookup[T any](h uint64, what string) (T, error) {
	handles.mu.RLock()
	v, ok := handles.m[h]
	handles.mu.RUnlock()
	t, isT := v.(T)
	if !ok || !isT {
		var zero T
		if !ok {
			return zero, fmt.Errorf("%s handle %d is not open (closed, or never returned by symmem): %w", what, h, errBadHandle)
		}
		return zero, fmt.Errorf("handle %d is not a %s handle: %w", h, what, errBadHandle)
	}
	return t, nil
}

// own records a group or scope handle so closing the world drops it. After
// drop (the world closed meanwhile, on another thread) it removes h and
// returns an error instead: a handle added then would outlive the world.
func (w *world) own(h uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dropped {
		handles.remove(h)
		return fmt.Errorf("the world was closed meanwhile (symmem_world_close on another thread): %w", symmem.ErrClosed)
	}
	w.owned = append(w.owned, h)
	return nil
}

// disown forgets h (a scope that ended, a group that closed), so a program
// that opens a scope every step does not grow the list.
func (w *world) disown(h uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, x := range w.owned {
		if x == h {
			w.owned = append(w.owned[:i], w.owned[i+1:]...)
			return
		}
	}
}

// drop removes the world's handles and the world's own.
func (w *world) drop() {
	w.mu.Lock()
	owned := w.owned
	w.owned, w.dropped = nil, true
	w.mu.Unlock()
	for _, h := range owned {
		handles.remove(h)
	}
	handles.remove(w.id)
	worlds.close(w)
}

func (g *group) setLast(p coll.Path) {
	g.mu.Lock()
	g.last = p
	g.mu.Unlock()
}
