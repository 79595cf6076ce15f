package shm

import (
	"context"
	"fmt"
	"sync"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/pool"
	"github.com/symmem/symmem/rendezvous"
)

// Backend is the CPU shared-memory backend of one process.
type Backend struct {
	env  rendezvous.Env
	prov *Provider

	mu     sync.Mutex
	groups map[*Group]struct{}
	closed bool
}

var _ backend.Backend = (*Backend)(nil)

// New returns the CPU backend for the rank described by e (JobID namespaces
// store keys).
func New(e rendezvous.Env) *Backend {
	prov := NewProvider()
	prov.local = e.LocalWorldSize
	return &Backend{env: e, prov: prov, groups: map[*Group]struct{}{}}
}

// Name is "cpu".
func (b *Backend) Name() string { return "cpu" }

// Provider supplies memfd segments to the process's pool.
func (b *Backend) Provider() pool.Provider { return b.prov }

// Segments reports how many segments the provider holds (for tests and doctor).
func (b *Backend) Segments() int { return b.prov.Len() }

// NewGroup creates the backend side of a group; collective over cfg.Ranks.
func (b *Backend) NewGroup(ctx context.Context, cfg backend.GroupConfig) (backend.Group, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("shm: NewGroup %q: backend is closed", cfg.Name)
	}
	b.mu.Unlock()
	g, err := newGroup(ctx, b, cfg, cfg.Gen)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.groups[g] = struct{}{}
	b.mu.Unlock()
	return g, nil
}

func (b *Backend) forget(g *Group) {
	b.mu.Lock()
	delete(b.groups, g)
	b.mu.Unlock()
}

// Close closes every group still open and releases every segment. The pool
// should be closed first (it releases segments in order); Close is the
// backstop that leaves no mapping or fd behind.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	gs := make([]*Group, 0, len(b.groups))
	for g := range b.groups {
		gs = append(gs, g)
	}
	b.mu.Unlock()
	for _, g := range gs {
		g.Close()
	}
	return b.prov.Close()
}
