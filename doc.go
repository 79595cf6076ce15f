// Package symmem is the user API: collectives (all-gather, reduce-scatter,
// all-reduce, broadcast) on symmetric memory, for a job of ranks started by
// `symmem launch` or torchrun.
//
//	w, err := symmem.Init(ctx, symmem.Options{})      // reads RANK, WORLD_SIZE, ...
//	defer w.Close()
//	g := w.World()
//	sc, _ := g.OpenScope()
//	in, _ := sc.Alloc(1 << 20)                          // same sizes on every rank
//	out, _ := sc.Alloc(int64(g.Size()) << 20)
//	sc.End(ctx)                                         // registers new segments (collective)
//	path, err := g.AllGather(ctx, out.Span, in.Span, coll.Float32)
//
// The package owns the choices between the layers: which backend serves the
// process (Options.Backend), the one pool shared by every group, group
// creation, argument validation (clear errors before anything moves), the
// optional cross-rank check of every call (Options.Checked), and the path
// each call takes. A call whose buffers lie inside symmetric blocks
// registered with the group runs on the direct path; ordinary memory is
// staged through a per-group symmetric staging buffer where buffers are host
// memory (a device backend runs it itself), and the returned coll.Path says
// so (Staged, with the reason).
//
// # The program contract
//
// Symmetric memory needs every rank to make the same pool calls in the same
// order: Init, NewGroup, Group.Close, Scope.Alloc, Scope.End, World.Alloc
// and World.Free, on every rank of the world, with the same sizes. They
// change or compare the one pool every group shares (a scope end compares
// the whole pool's state; Group.Close frees the group's staging buffer), so
// within a process they are ordered too: from one goroutine, or ordered
// between goroutines the same way on every rank; NewGroup and Group.Close
// are also collectives of the world group, ordered with its collectives. A
// rank that is not a member of a group still receives a *Group from
// NewGroup (IsMember reports false); its scopes allocate the same blocks
// (so the pools stay identical) but register nothing, and its collectives
// return ErrNotMember. Collectives of a group are called by its members in
// the same order: calls of one group from several goroutines run one at a
// time, in an order that may differ between ranks. Collectives of different
// groups may run on different goroutines at once.
package symmem
