package cuda

import (
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// ceMode is how the peer data moves.
type ceMode int

const (
	modePull ceMode = iota // each rank reads its peers' inputs (copy engine of the reader)
	modePush               // each rank writes its input into its peers' outputs
)

// The copy-engine all-gather's shape was chosen from variants measured
// against each other (the variants are gone from the code):
//   - push (write into the peers' outputs) beat pull at every size from
//     1 MiB; pull remains for an ordinary output with a registered input;
//   - the out-of-place local copy on a side stream was best or equal at
//     every size;
//   - splitting a transfer over two streams, and half-pull/half-push, did
//     not help;
//   - single stream-memory-op calls beat cuStreamBatchMemOp on GPU time for
//     ~1 us more host time;
//   - replaying a captured graph cost more host time and gave no GPU time
//     over single calls.

// ceModeFor is push when the output is registered, else pull.
func ceModeFor(req backend.Request) ceMode {
	if req.OutSym.OK {
		return modePush
	}
	return modePull
}

// cePath is the copy-engine all-gather and all-to-all (algorithm ce;
// all-to-all: buildA2A).
type cePath struct {
	whole
	g   *core
	row *pathInfo
}

// serves reports whether copy engines can run req, in a group whose ranks
// reach each other: an all-gather with a registered output, or input out
// of place (in place, the peers' slices are read from their outputs); an
// all-to-all with a registered output, equal or with host split counts.
// build finds nothing more to refuse: it runs after the call was
// published at the gate.
func (ce *cePath) serves(req backend.Request) bool {
	if !ce.row.does(req.Kind) || !ce.g.caps.ce || len(ce.g.Ranks) > maxCERanks {
		return false
	}
	if req.Kind == coll.AllToAll {
		return a2aWhy(req) == ""
	}
	return req.OutSym.OK || req.InSym.OK && !req.InPlace
}

// whyNot says why copy engines cannot run req (nil if they can).
func (ce *cePath) whyNot(req backend.Request) error {
	switch {
	case ce.serves(req):
		return nil
	case !ce.row.does(req.Kind) || !ce.g.caps.ce || len(ce.g.Ranks) > maxCERanks || req.Kind == coll.AllToAll && req.A2A.Kind() == backend.SplitsDevice:
		return fmt.Errorf("%s: %w", ce.why(req), errs.NotSupported)
	}
	return fmt.Errorf("%s: %w", ce.why(req), errNotSymmetric)
}

func (ce *cePath) refuse(c call) error { return refused(c, ce.whyNot(c.req)) }

// why says why copy engines cannot run req, which they do not serve.
func (ce *cePath) why(req backend.Request) string {
	switch {
	case !ce.row.does(req.Kind):
		return "copy engines serve all_gather and all_to_all only"
	case !ce.g.caps.ce:
		return "copy engines unavailable: " + ce.g.caps.ceWhy
	case len(ce.g.Ranks) > maxCERanks:
		return fmt.Sprintf("the copy-engine paths serve up to %d ranks, the group has %d", maxCERanks, len(ce.g.Ranks))
	}
	if why := a2aWhy(req); why != "" {
		return why
	}
	if req.InPlace && req.InSym.OK {
		return "in place, the output must be a pool block registered with this group (the peers' slices are read from it)"
	}
	return "the buffers are not pool blocks registered with this group"
}

// issue issues one copy-engine all-gather. The caller holds runMu. Layout: out holds n slices of slice bytes; in is this rank's slice
// (in-place when in == out[me]).
//
// Stream program (main stream s):
//
//	[ranks on one host] wait for the call gate's approval (gate.go)
//	[checked mode] fork: the handshake beside it (handshake.go)
//	[out-of-place] fork: side0 copies in -> out[me]
//	signal ready: write 1 to every peer, wait for every peer's 1, reset to 0
//	copies from/to peers, split over s and side streams (fork/join by events)
//	[checked mode] join the handshake
//	signal done (the same round on the done words)
//	join side0
//
// track lets quiesce fence the stream later.
func (ce *cePath) issue(c call) error {
	p := ce.g.newProgram() // memory ops go one call each: less GPU time than one cuStreamBatchMemOp (see above)
	if c.req.Kind == coll.AllToAll {
		if err := ce.buildA2A(p, &c); err != nil {
			return err
		}
		return ce.g.issue(p, &c, "copy-engine all-to-all")
	}
	if err := ce.build(p, &c); err != nil {
		return err
	}
	return ce.g.issue(p, &c, "copy-engine all-gather")
}

// build adds c, one all-gather, to p (pure: no driver call).
func (ce *cePath) build(p *cudadrv.Program, c *call) error {
	g, req := ce.g, c.req
	xs, nx, err := ce.copies(req)
	if err != nil {
		return err
	}
	me := g.Me
	slice := req.Count * int64(req.DType.Size())
	local := xfer{}
	if !req.InPlace {
		local = xfer{req.Out.Ptr + uint64(int64(me)*slice), req.In.Ptr, slice}
	}
	ce.program(p, c, local, xs[:nx])
	return nil
}

// program adds the stream program both copy-engine collectives share to
// p: the gate's approval first (gate.go), the local copy (n > 0) on a side
// stream beside the peers' transfers, and the ready and done rounds, which
// every rank signals even where it moves nothing (its peers count on
// them).
func (ce *cePath) program(p *cudadrv.Program, c *call, local xfer, xs []xfer) {
	g, req, s := ce.g, c.req, c.req.Stream
	g.gate.guard(p, s, c.gate)
	g.hs.fork(p, s, req)
	localJoin := uint64(0)
	if local.n > 0 {
		localJoin = g.st.localCopy(p, s, local)
	}
	g.peers.signal(p, s, slotReady, g.Me)
	g.st.transfers(p, s, xs)
	g.hs.join(p, s, req)
	g.peers.signal(p, s, slotDone, g.Me)
	if localJoin != 0 {
		p.WaitEvent(s, localJoin)
	}
}

// copies are req's copies between this rank and its peers: one per
// peer, in rotated order (me+1, me+2, ...), so that transfer i of every
// rank goes to a different peer and no GPU is every rank's first target.
func (ce *cePath) copies(req backend.Request) (xs [maxCERanks]xfer, nx int, err error) {
	g := ce.g
	n, me := len(g.Ranks), g.Me
	if n > maxCERanks {
		return xs, 0, fmt.Errorf("copy-engine all-gather supports up to %d ranks, the group has %d", maxCERanks, n)
	}
	slice := req.Count * int64(req.DType.Size())
	out, in := req.Out.Ptr, req.In.Ptr
	inPlace := req.InPlace
	mode := ceModeFor(req)
	for k := 1; k < n; k++ {
		r := (me + k) % n
		var src uint64
		var ok bool
		switch {
		case inPlace && req.OutSym.OK:
			src, ok = g.peers.at(req.OutSym.Seg, r, req.OutSym.Off+int64(r)*slice)
		case !inPlace && req.InSym.OK:
			src, ok = g.peers.at(req.InSym.Seg, r, req.InSym.Off)
		}
		if mode == modePull {
			if !ok {
				return xs, 0, fmt.Errorf("copy-engine all-gather needs the input in a pool block registered with group %q (in-place: the output): %w", g.GroupName, errNotSymmetric)
			}
			xs[nx] = xfer{out + uint64(int64(r)*slice), src, slice}
		} else {
			dst, ok := g.peers.at(req.OutSym.Seg, r, req.OutSym.Off+int64(me)*slice)
			if !ok {
				return xs, 0, fmt.Errorf("copy-engine push needs the output registered with group %q: %w", g.GroupName, errNotSymmetric)
			}
			xs[nx] = xfer{dst, in, slice}
		}
		nx++
	}
	return xs, nx, nil
}

// All-to-all on copy engines (algorithm ce, op all_to_all): every rank
// pushes its block for rank j straight into rank j's output, at the place
// of this rank's block there, through the peer mappings (one copy per
// peer; its own block is a local copy). The ordering is the all-gather's
// push (program): the local copy forks to a side stream, the ready round
// says every peer's output is free, the copies run, and the done round
// says every peer's copies into this rank's output are complete. The
// output must be registered with the group on every rank; the input may
// be any memory of this device.
//
// With host split counts the place of this rank's block in rank j's
// output is the sum of what j receives from the ranks before this one:
// a column of the whole count matrix, which Run exchanges before the call
// (splitMatrix) and checks there on every rank alike.

// a2aBlock is one block of this rank's all-to-all, in bytes: src is its
// offset in In, dst its offset in the receiver's Out, n its length.
type a2aBlock struct{ src, dst, n int64 }

// a2aBlocks are the blocks this rank (me of n) sends to each rank: the
// equal form's from req.Count, host splits' from m (m[i][j]: elements
// rank i sends rank j, as splitMatrix returns it).
func a2aBlocks(req backend.Request, n, me int, m [][]int64) (bs [maxCERanks]a2aBlock) {
	es := int64(req.DType.Size())
	if req.A2A.Kind() == backend.SplitsEqual {
		b := req.Count * es
		for j := range n {
			bs[j] = a2aBlock{src: int64(j) * b, dst: int64(me) * b, n: b}
		}
		return bs
	}
	var src int64
	for j := range n {
		var dst int64
		for i := range me {
			dst += m[i][j]
		}
		bs[j] = a2aBlock{src: src * es, dst: dst * es, n: m[me][j] * es}
		src += m[me][j]
	}
	return bs
}

// buildA2A adds c, one all-to-all, to p (pure: no driver call). c.counts
// holds the count matrix with host splits.
func (ce *cePath) buildA2A(p *cudadrv.Program, c *call) error {
	g, req := ce.g, c.req
	n, me := len(g.Ranks), g.Me
	if n > maxCERanks {
		return fmt.Errorf("copy-engine all-to-all supports up to %d ranks, the group has %d", maxCERanks, n)
	}
	if req.A2A.Kind() == backend.SplitsHost && len(c.counts) != n {
		return fmt.Errorf("copy-engine all-to-all with host split counts: %d rows of counts for %d ranks", len(c.counts), n)
	}
	bs := a2aBlocks(req, n, me, c.counts)
	var xs [maxCERanks]xfer
	nx := 0
	// Rotated order (me+1, me+2, ...): transfer i of every rank goes to
	// a different peer.
	for k := 1; k < n; k++ {
		r := (me + k) % n
		b := bs[r]
		if b.n == 0 {
			continue
		}
		dst, ok := g.peers.at(req.OutSym.Seg, r, req.OutSym.Off+b.dst)
		if !ok {
			return fmt.Errorf("copy-engine all-to-all needs the output registered with group %q on every rank: %w", g.GroupName, errNotSymmetric)
		}
		xs[nx] = xfer{dst, req.In.Ptr + uint64(b.src), b.n}
		nx++
	}
	b := bs[me]
	ce.program(p, c, xfer{req.Out.Ptr + uint64(b.dst), req.In.Ptr + uint64(b.src), b.n}, xs[:nx])
	return nil
}

// a2aWhy says why copy engines cannot run the all-to-all req ("" if they
// can, as far as the all-to-all itself goes).
func a2aWhy(req backend.Request) string {
	switch {
	case req.Kind != coll.AllToAll:
		return ""
	case req.A2A.Kind() == backend.SplitsDevice:
		return "copy engines take host split counts only (symmem's all-to-all kernel reads split counts on the device)"
	case !req.OutSym.OK:
		return "the copy-engine all-to-all writes into the peers' outputs: the output must be a pool block registered with this group"
	}
	return ""
}
