package shm

import "fmt"

// failFast returns the error that broke the group, if one did, or names a
// peer process that has exited: a store exchange would otherwise wait the
// whole timeout for peers that are gone or stuck (World.Close after a
// failure). A peer that dies during an exchange is still found only at the
// timeout: the store cannot see processes, and a peer that exits after
// posting its value is not a failure.
func (g *Group) failFast() error {
	if err := g.failed.Load(); err != nil {
		return *err
	}
	for r := range g.pidfds {
		if err := g.alive(r); err != nil {
			return fmt.Errorf("shm: group %q: %w", g.name, err)
		}
	}
	return nil
}

// breakOn marks the group broken by err (the caller holds runMu).
func (g *Group) breakOn(err error) {
	g.broken = fmt.Errorf("shm: group %q: %w (after: %v)", g.name, ErrBroken, err)
	e := g.broken
	g.failed.Store(&e)
}
