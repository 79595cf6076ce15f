// Package pool is symmem's symmetric memory pool, in pure Go. It owns all
// bookkeeping shared by every backend: the segments of one device or process
// (created on demand, tracked at creation, in order, with stable ids), the
// blocks carved out of them, the scopes in which allocations become
// symmetric, the per-group registration cursors, and the address lookup that
// decides whether a collective can take the symmetric path.
//
// Backends supply memory through a Provider and, per group of ranks, a Group
// (a small all-gather for verification, and the registration of segments).
// Backends hold no pool state.
//
// # The symmetry contract
//
// Every decision the pool makes depends only on the sequence of calls made on
// it, never on addresses, timing or the rank: segment ids are assigned 1, 2, 3,
// ... in creation order; a new segment has max(MinSegment, request) bytes
// rounded up to the provider's granularity; Alloc picks, among all free
// blocks, the smallest one that fits at the requested alignment (ties broken
// by segment id, then offset), splits it, and Free coalesces with free
// neighbours. Alignment applies to the offset within the segment (segment
// bases are aligned to the provider's granularity, so addresses are aligned
// too). Hence: if every rank makes the same calls (Reserve, Alloc with the
// same size and alignment, Free of the same blocks, Trim) in the same order,
// every rank gets the same (segment, offset) for every block, and a block
// exists on every rank at the same pool offset. That is what makes it
// symmetric.
//
// Ranks making different calls break the contract; the pool detects that
// at every Scope.End, before any collective registration. Stream-ordered
// reuse does not break it: a block freed with a Fence is placed as if free
// at once, and the Alloc that is handed any of its bytes (or the Trim that
// releases its segment) waits for the fence first, so placement never
// depends on when a fence completes on each rank. The pool keeps a hash of
// its allocation state (every live block as its Alloc request and result,
// every segment) and an allocation log of every Alloc and Free. Every
// Scope.End (also one with nothing to register) first compares across the
// group's ranks the state and the segments about to be registered: in-band
// through the group's Agreer where it has one (one signal phase on the CPU
// backend), otherwise through Group.AllGather; every Trim that releases
// segments compares likewise through Group.AllGather, and every group
// removal compares the segments to deregister. On any difference every rank
// returns an error wrapping ErrMismatch that names the first differing rank
// and what differed (the first differing log entry since the group's last
// check, when the pool still keeps it: the last 1024 entries are kept; after
// a check that found a difference, the first live block that still differs,
// as the log then holds the Frees that mended part of it), and nothing is
// registered or released. The state forgets what was undone:
// once every rank freed what differed, scope ends succeed again; segments
// that differ (ids are never reused) cannot be undone, and the error says
// so. Each block carries a generation (Block.Gen) so
// that a freed block can be told from a later one at the same address
// (Live, Freed).
//
// Concurrent calls from several goroutines are safe, but calls racing each
// other are ordered by the scheduler, so symmetry requires the symmetric calls
// to be made in program order (for example from one goroutine per rank).
//
// # Scopes and registration
//
// OpenScope(g) opens a scope for a group; scopes of one group nest and end in
// reverse order (ErrScopeOrder otherwise); scopes of different groups are
// independent. Scope.End registers, in creation order, every segment the group
// has not registered yet (the group's cursor is the last registered segment
// id). Every End is collective over the group, so it behaves alike on every
// rank whatever each allocated. DisabledScope returns a scope whose End does
// nothing, for code paths that must not register.
//
// Fence.Done is called with the pool's lock held (at Alloc, Trim and Stats; polled
// while a reused range's fence is not done, up to Options.Timeout): it must be
// cheap and must not call the pool.
//
// Trim is collective over every group that has segments registered: call it on
// all ranks of those groups at the same point of the program. Close removes
// every group (collective) and releases every segment.
package pool
