package symmem

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/doctor"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/pool"
	"github.com/symmem/symmem/rendezvous"
)

// World is this process's view of the job: the backend, its kind of memory,
// the one pool shared by every group, and the groups.
type World struct {
	env     rendezvous.Env
	opts    Options
	store   *rendezvous.Client
	cleanup func() error
	fdx     *rendezvous.FDExchange
	be      backend.Backend
	caps    backend.Capabilities
	mem     memory // what buffers are: host or device memory
	pool    *pool.Pool
	why     string           // why this backend (doctor)
	auto    doctor.AutoTable // the table auto reads (doctor)
	machine doctor.Machine   // this rank's machine (doctor)

	mu     sync.Mutex
	groups []*Group // creation order; groups[0] is the world
	made   uint64   // NewGroup calls so far, on every rank (the pool's group order)
	closed bool
}

// Init joins the job described by the environment (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT as torchrun sets
// them, plus SYMMEM_TOKEN or torchrun's TORCHELASTIC_RUN_ID; see
// rendezvous.Env): it connects to the rendezvous store, starts the backend and
// the pool and creates the world group. Collective over the world.
func Init(ctx context.Context, opts Options) (_ *World, err error) {
	defer markTimeout(&err)
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("symmem: Init: %w", err)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Pool.Timeout == 0 {
		opts.Pool.Timeout = opts.Timeout
	}
	if opts.StagingBytes == 0 {
		opts.StagingBytes = DefaultStagingBytes
	}
	var env rendezvous.Env
	if opts.Env != nil {
		env = *opts.Env
	} else {
		e, err := rendezvous.EnvFromOS()
		if err != nil {
			return nil, fmt.Errorf("symmem: Init: %w", err) // the error says how to start ranks
		}
		env = e
	}
	if _, _, err := ResolveBackend(opts.Backend); err != nil {
		return nil, fmt.Errorf("symmem: Init: %w", err)
	}
	bctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	store, cleanup, err := rendezvous.Bootstrap(bctx, env)
	if err != nil {
		return nil, fmt.Errorf("symmem: Init: %w", err)
	}
	w := &World{env: env, opts: opts, store: store, cleanup: cleanup}
	// Init failed past this point: the peers may have given up or never
	// come, so cleanup's exit barrier waits 1 s for them, not 30 s.
	if w.fdx, err = rendezvous.NewFDExchange(env); err != nil {
		store.Failed()
		cleanup()
		return nil, fmt.Errorf("symmem: Init: %w", err)
	}
	if w.be, w.why, w.auto, w.machine, err = newBackend(opts.Backend, env, opts); err != nil {
		w.fdx.Close()
		store.Failed()
		cleanup()
		return nil, fmt.Errorf("symmem: Init: %w", err)
	}
	w.caps = w.be.Capabilities()
	if w.pool, err = pool.New(w.be.Provider(), opts.Pool); err != nil {
		store.Failed()
		w.release()
		return nil, fmt.Errorf("symmem: Init: %w", err)
	}
	w.mem, w.opts.StagingBytes = newMemory(w.caps.Device, w.pool, w.opts.Timeout, w.opts.StagingBytes)
	all := make([]int, env.WorldSize)
	for i := range all {
		all[i] = i
	}
	if _, err := w.newGroup(bctx, "world", all, false); err != nil {
		store.Failed()
		w.release()
		return nil, fmt.Errorf("symmem: Init (%s backend, rank %d of %d): %w", w.be.Name(), env.Rank, env.WorldSize, err)
	}
	return w, nil
}

// Rank is this process's rank in the world.
func (w *World) Rank() int { return w.env.Rank }

// Size is the number of ranks in the world.
func (w *World) Size() int { return w.env.WorldSize }

// LocalSize is the number of ranks on this process's host
// (LOCAL_WORLD_SIZE).
func (w *World) LocalSize() int { return w.env.LocalWorldSize }

// Backend names the backend ("cpu" or "cuda").
func (w *World) Backend() string { return w.be.Name() }

// World is the group of all ranks.
func (w *World) World() *Group {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.groups) == 0 {
		return nil
	}
	return w.groups[0]
}

// Groups lists the groups in creation order (the world first).
func (w *World) Groups() []*Group {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.groups)
}

// NewGroup creates a group of the given world ranks. It is collective over
// the whole world: every rank calls it with the same name and ranks (the
// call verifies that and fails with ErrMismatch naming the first differing
// rank). Members get a usable group; non-members get a *Group whose
// IsMember is false (its scopes only mirror allocations, its collectives
// return ErrNotMember). Names are unique within the world.
func (w *World) NewGroup(ctx context.Context, name string, ranks []int) (_ *Group, err error) {
	defer markTimeout(&err)
	if err := w.alive(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	return w.newGroup(ctx, name, ranks, true)
}

func (w *World) newGroup(ctx context.Context, name string, ranks []int, verify bool) (*Group, error) {
	sorted, err := w.checkGroup(name, ranks)
	if err != nil {
		return nil, err
	}
	if verify {
		if err := w.agree(ctx, "NewGroup", fmt.Sprintf("name=%q ranks=%v", name, sorted)); err != nil {
			return nil, err
		}
	}
	g := &Group{w: w, name: name, ranks: sorted, rank: slices.Index(sorted, w.env.Rank), gid: -1}
	gen := backend.Generation(w.env.JobID, name) // on every rank: members change when a name is used again
	w.mu.Lock()
	w.made++
	order := w.made // the pool's collectives over every group go in creation order, alike on every rank
	w.mu.Unlock()
	var made error
	if g.rank >= 0 {
		cfg := backend.GroupConfig{Name: name, Ranks: sorted, Rank: w.env.Rank, Store: w.store, FDs: w.fdx, Timeout: w.opts.Timeout, Gen: gen}
		var bg backend.Group
		if bg, made = w.be.NewGroup(ctx, cfg); made == nil {
			g.bg = w.mem.group(g, bg)
			g.gid, made = w.pool.AddGroup(bg, order)
		}
	}
	what := fmt.Sprintf("NewGroup %q", name)
	if verify {
		made = w.allMade(ctx, what, made)
	} else if made != nil {
		made = fmt.Errorf("symmem: %s: %w", what, made)
	}
	if made != nil { // nothing registered yet: each rank undoes its part alone
		if g.gid >= 0 {
			w.pool.DropGroup(g.gid)
		}
		if g.bg != nil {
			g.bg.Close()
		}
		return nil, made
	}
	// Every rank allocates every group's staging buffer, so the pools stay
	// identical; members register it now.
	if w.opts.StagingBytes > 0 {
		blk, err := w.pool.Alloc(w.opts.StagingBytes, Align)
		if err != nil {
			g.drop(ctx)
			return nil, fmt.Errorf("symmem: NewGroup %q: staging buffer of %d bytes: %w", name, w.opts.StagingBytes, err)
		}
		g.staging = coll.Span{Ptr: blk.Addr, Len: w.opts.StagingBytes}
	}
	if g.rank >= 0 {
		sc, err := w.pool.OpenScope(g.gid)
		if err == nil {
			err = sc.End(ctx)
		}
		if err != nil {
			g.drop(ctx)
			return nil, fmt.Errorf("symmem: NewGroup %q: registering the pool's segments: %w", name, err)
		}
	}
	w.mu.Lock()
	w.groups = append(w.groups, g)
	w.mu.Unlock()
	return g, nil
}

// checkGroup validates name and ranks and returns the ranks sorted.
func (w *World) checkGroup(name string, ranks []int) ([]int, error) {
	if name == "" {
		return nil, fmt.Errorf("symmem: NewGroup: empty name (give the group a name, e.g. \"tp0\"): %w", ErrInvalid)
	}
	if strings.ContainsAny(name, "/ \t\n") {
		return nil, fmt.Errorf("symmem: NewGroup %q: name must not contain '/' or spaces: %w", name, ErrInvalid)
	}
	if len(ranks) == 0 {
		return nil, fmt.Errorf("symmem: NewGroup %q: no ranks: %w", name, ErrInvalid)
	}
	sorted := slices.Clone(ranks)
	slices.Sort(sorted)
	for i, r := range sorted {
		if r < 0 || r >= w.env.WorldSize {
			return nil, fmt.Errorf("symmem: NewGroup %q: rank %d is outside the world [0,%d): %w", name, r, w.env.WorldSize, ErrInvalid)
		}
		if i > 0 && r == sorted[i-1] {
			return nil, fmt.Errorf("symmem: NewGroup %q: rank %d listed twice: %w", name, r, ErrInvalid)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, g := range w.groups {
		if g.name == name {
			return nil, fmt.Errorf("symmem: NewGroup %q: a group of that name exists: %w", name, ErrInvalid)
		}
	}
	return sorted, nil
}

// agree checks that every rank of the world passes the same description.
func (w *World) agree(ctx context.Context, what, mine string) error {
	wg := w.World()
	// In-band first where the world has an agreement: a peer at a collective
	// or scope end of the world compares there and never joins the store
	// exchange below (both waited until the timeout).
	if a := wg.bg.Agreer(); a != nil && wg.Size() > 1 {
		err := a.Agree(ctx, agree.WorldRecord(what, mine))
		d := agree.AsDisagreement(err)
		switch {
		case d != nil && d.AllKind != agree.RecWorld:
			return fmt.Errorf("symmem: %s: %s: %w", what, d.Explain(wg.ranks), ErrMismatch)
		case d == nil && err != nil && !errors.Is(err, ErrBroken):
			return fmt.Errorf("symmem: %s: %w", what, err)
		}
		// Alike, or every rank at a world call: the store names the values.
		// A world group broken by an earlier failure (its agreement fails
		// every call) still lets world calls meet there, as before.
	}
	all, err := wg.bg.AllGather(ctx, []byte(mine))
	if err != nil {
		return fmt.Errorf("symmem: %s: %w", what, err)
	}
	return firstDiff(what, wg.ranks, all)
}

// allMade tells every rank whether every rank made its part of a
// collective step (mine: this rank's error, nil if it did): a member that
// failed alone would leave its peers with a group it lacks, and the
// non-members' pools with a staging buffer the members never allocated.
// It returns mine, or the first failing rank's error, wrapping the same
// sentinel, so that every rank fails alike; both say what (the step).
func (w *World) allMade(ctx context.Context, what string, mine error) error {
	var msg []byte
	if mine != nil {
		msg = append([]byte{byte(sentinelIndex(mine))}, mine.Error()...)
	}
	wg := w.World()
	all, err := wg.bg.AllGather(ctx, msg)
	switch {
	case mine != nil:
		return fmt.Errorf("symmem: %s: %w", what, mine)
	case err != nil:
		return fmt.Errorf("symmem: %s: learning whether every rank made its part: %w", what, err)
	}
	for q, v := range all {
		if len(v) > 0 {
			err := fmt.Errorf("symmem: %s: rank %d failed: %s (so every rank undid its part: call it again once that is mended)", what, wg.ranks[q], v[1:])
			if i := int(v[0]); i > 0 && i <= len(sentinels) {
				err = fmt.Errorf("%w: %w", err, sentinels[i-1])
			}
			return err
		}
	}
	return nil
}

// firstDiff returns ErrMismatch naming the first rank whose value differs
// from the lowest rank's.
func firstDiff(what string, ranks []int, all [][]byte) error {
	for r := 1; r < len(all); r++ {
		if string(all[r]) != string(all[0]) {
			return fmt.Errorf("symmem: %s: rank %d called it with %s, rank %d with %s: %w",
				what, ranks[r], all[r], ranks[0], all[0], ErrMismatch)
		}
	}
	return nil
}

func (w *World) alive() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("symmem: the world is closed (World.Close was called): %w", ErrClosed)
	}
	return nil
}

// Close removes every group (deregistering its segments; collective),
// releases the pool's segments and the backend, and leaves the store.
// Local resources are released even when a collective step fails (a peer
// died): the error then says what failed.
func (w *World) Close() (err error) {
	defer markTimeout(&err)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	groups := slices.Clone(w.groups)
	w.mu.Unlock()
	// Peers still waiting for this rank in a call of a group fail at once
	// (ErrPeerClosed), and those not closing too fail the teardown's
	// exchanges below (instead of stalling them for the timeout). A
	// Group.Close in progress ends first (its group is then skipped).
	for _, g := range groups {
		g.teardown.Lock()
		if g.bg != nil && !g.closed.Load() {
			g.bg.Leave()
		}
		g.teardown.Unlock()
	}
	// Calls of this rank in flight on other goroutines end before the pool
	// releases their memory (they fail fast: the peers left too, or are
	// told so above); later ones find the group closed.
	for _, g := range groups {
		g.mu.Lock()
		g.closed.Store(true)
		g.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.opts.Timeout)
	defer cancel()
	var errs []error
	if err := w.pool.Close(ctx); err != nil {
		// release below unmaps the segments: no Buffer may reach them.
		w.pool.Abandon()
		errs = append(errs, fmt.Errorf("the ranks could not take the groups down together, so this rank released its own resources alone: %w", err))
		w.store.Failed() // a rank is gone or stuck: do not wait 30 s for it at exit
	}
	errs = append(errs, w.release())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("symmem: Close (rank %d): %w", w.env.Rank, err)
	}
	return nil
}

// release frees local resources in reverse order of Init.
func (w *World) release() error {
	var errs []error
	for _, g := range w.groups {
		if g.bg != nil {
			errs = append(errs, g.bg.Close())
		}
	}
	if w.be != nil {
		errs = append(errs, w.be.Close())
	}
	if w.fdx != nil {
		w.fdx.Close()
	}
	if w.cleanup != nil {
		errs = append(errs, w.cleanup())
	}
	return errors.Join(errs...)
}

// Supports reports whether WithAlgo(a) is accepted for k on this world's
// backend (auto always is); others fail with ErrNotSupported.
func (w *World) Supports(k coll.Kind, a coll.Algo) bool { return w.caps.Supports(k, a) }

// Algos lists the algorithms WithAlgo may force for k besides auto.
func (w *World) Algos(k coll.Kind) []coll.Algo { return append([]coll.Algo(nil), w.caps.Algos[k]...) }
