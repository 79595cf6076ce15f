package cuda

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// In-band argument check of symmem's kernels. Every kernel launch carries a
// 32-bit digest of the call's arguments (backend.Request.Record: kind,
// type, count, op, root, in-place, pool offsets); each CTA sends it with its
// ready signal and compares the one each peer sent before it moves any
// data. On a difference every CTA of every rank ends without touching the
// outputs and writes a report (the peer, both digests, the launch)
// into the group's mapped host words, which the host reads on the group's
// next call and on Synchronize: ErrMismatch on every rank, the outputs as
// they were, the group still usable. It costs the host one atomic load per
// call, plus one entry in a ring of the group's recent calls (recent).
//
// To name the argument that differs, the host finds its own record by
// digest in that ring and swaps records with the reporting peer
// through the store (every rank of a differing pair gets a report, so both
// publish), waiting at most faultSwapWait; a record aged out of the ring
// (more than recentCalls calls were queued behind it, or a CUDA graph
// replayed it long after capture), or a peer that does not answer in time,
// leaves the digests in the message instead. Copy-engine paths and
// NCCL calls are checked by the call gate (gate.go), and in checked mode
// also by the handshake kernel beside them (handshake.go).

// recentCalls is how many of the group's calls with a digest the host keeps
// (about 14 KiB per group): a report arrives once the GPU has run the
// mismatched launch, so this bounds how far the host may have queued ahead.
const recentCalls = 256

// faultSwapWait bounds the store swap that names the argument (the group
// timeout if smaller): the error is due now, the names are a courtesy.
const faultSwapWait = 3 * time.Second

// faults is where a group's kernels report a mismatch, and what the host
// keeps to name it. The caller holds runMu for every method.
type faults struct {
	g      *core
	words  *cudadrv.HostMapped // where the kernels write a report (nil: no kernels)
	recent callRing            // the recent calls with a digest
	// stopped is the mismatch that made the handshake stop the device
	// (handshake.go): it explains every later launch failure, also after
	// the call that reported it.
	stopped error
}

// callRing holds the group's most recent calls with a digest (the caller
// holds runMu). No allocation per call.
type callRing struct {
	n uint64 // calls added so far
	e [recentCalls]ringEntry
}

type ringEntry struct {
	digest uint32
	call   agree.Call
}

// add records a call. A two-shot's second launch adds its call again: one
// entry more, cheaper than comparing.
func (r *callRing) add(d uint32, rec *agree.Record, algo coll.Algo) {
	e := &r.e[r.n%recentCalls]
	e.digest, e.call.Record, e.call.Path = d, *rec, algo
	r.n++
}

// find returns the newest call with digest d.
func (r *callRing) find(d uint32) (agree.Call, bool) {
	for k := uint64(1); k <= min(r.n, recentCalls); k++ {
		if e := &r.e[(r.n-k)%recentCalls]; e.digest == d {
			return e.call, true
		}
	}
	return agree.Call{}, false
}

// digest is the digest a launch of req carries; it keeps req's record
// among the recent calls to name a difference with.
func (f *faults) digest(req *backend.Request) uint32 {
	d := agree.Digest(agree.Call{Record: req.Record, Path: req.Algo})
	f.recent.add(d, &req.Record, req.Algo)
	return d
}

// faultReport is what a kernel wrote: group rank peer launched launch
// epoch of the kernel with digest theirs where this rank had mine (kind
// kindMismatch and kindStopped); or this rank's wait for peer in launch
// epoch ended because the call gate failed (kindAbandoned; theirs is 0);
// or the all-to-all's split counts are wrong (kindSplits: mine says what,
// peer and theirs are ranks, x and y the counts; the kernel path's
// all-to-all, kernel.go).
type faultReport struct {
	peer                int
	mine, theirs, epoch uint32
	kind                uint32 // kindMismatch, kindStopped (the handshake trapped: handshake.go), kindAbandoned, kindSplits
	x, y                uint64
}

// take returns (and clears) what the group's kernels reported, nil if
// nothing. A report of the handshake also breaks the group (it trapped,
// so this process's context is lost), and so does an abandoned wait (the
// gate failed: gate.go explains why).
func (f *faults) take() error {
	rep, ok := f.read()
	if !ok {
		return nil
	}
	if rep.kind == kindSplits { // every rank skipped the call: the group stays usable
		return f.splitsErr(rep)
	}
	if rep.kind == kindAbandoned {
		err := f.g.gate.ended()
		f.g.broken = err
		return err
	}
	err := f.explain(rep)
	if rep.kind == kindStopped {
		f.g.broken, f.stopped = err, err
	}
	return err
}

// splitsErr is the error of a split-count report: the first fault of the
// matrix every rank found, which made every rank skip the call.
func (f *faults) splitsErr(rep faultReport) error {
	rank := func(r int) int {
		if r >= 0 && r < len(f.g.Ranks) {
			return f.g.Ranks[r]
		}
		return r
	}
	i, j, x, y := rank(rep.peer), rank(int(rep.theirs)), int64(rep.x), int64(rep.y)
	var what string
	err := errs.Invalid
	switch rep.mine {
	case splitsDiffer:
		what, err = fmt.Sprintf("rank %d sends %d elements to rank %d, but rank %d expects %d from rank %d", i, x, j, j, y, i), errs.Mismatch
	case splitsNegative:
		what = fmt.Sprintf("rank %d's split count for rank %d is %d; counts are elements, >= 0", i, j, x)
	case splitsIn:
		what = fmt.Sprintf("rank %d's split counts reach %d elements, but its in holds %d", i, x, y)
	case splitsOut:
		what = fmt.Sprintf("rank %d would receive %d elements, but its out holds %d (the output's capacity bounds the counts)", i, x, y)
	default:
		what = fmt.Sprintf("split-count fault %d of rank %d", rep.mine, i)
	}
	return fmt.Errorf("cuda: group %q: an earlier %v (launch %d of symmem's kernels on this group) did nothing, on every rank: %s: %w",
		f.g.GroupName, coll.AllToAll, rep.epoch, what, err)
}

// read reads (and clears) the report a kernel of the group wrote since
// the last look; ok is false if there is none. One CTA per launch writes a
// report, clearing set first and setting it last (layout in
// kernel_layout.go), so a report read whole has the same set before and
// after its fields; a newer one being written meanwhile is left for the
// next look (the clear is a compare-and-swap).
func (f *faults) read() (rep faultReport, ok bool) {
	w := f.words
	if w == nil {
		return rep, false
	}
	for range 1000 {
		s := w.Load(faultSet)
		if s == 0 {
			return rep, false
		}
		rep = faultReport{peer: int(int32(w.Load(faultPeer))), mine: w.Load(faultMine), theirs: w.Load(faultTheirs),
			epoch: w.Load(faultEpoch), kind: w.Load(faultKind),
			x: uint64(w.Load(faultX)) | uint64(w.Load(faultX+1))<<32, y: uint64(w.Load(faultY)) | uint64(w.Load(faultY+1))<<32}
		if w.Load(faultSet) == s {
			w.CompareAndSwap(faultSet, s, 0)
			return rep, true
		}
	}
	return rep, false // reports keep arriving: the next look takes one
}

// explain turns a kernel's report into the user's error: the argument that
// differs with both values where the records can be had, the digests
// otherwise.
func (f *faults) explain(rep faultReport) error {
	outcome := "did nothing: its outputs were not written"
	if rep.kind == kindStopped {
		outcome = "was stopped by the handshake beside it (copy engines or NCCL: some copies may have run, nothing ordered after the call did): this process's CUDA context is lost, restart it"
	}
	kind, what := f.difference(rep)
	return fmt.Errorf("cuda: group %q: an earlier %s (launch %d of symmem's kernels on this group) %s; %s: %w",
		f.g.GroupName, kind, rep.epoch, outcome, what, errs.Mismatch)
}

// difference names the reported call's kind and what differs, with the fix:
// the argument with both values, or the paths, where the two records can be
// had; the digests and why not otherwise.
func (f *faults) difference(rep faultReport) (kind, what string) {
	g := f.g
	rank := rep.peer
	if rep.peer >= 0 && rep.peer < len(g.Ranks) {
		rank = g.Ranks[rep.peer]
	}
	me := g.Ranks[g.Me]
	mine, ok := f.recent.find(rep.mine)
	theirs, err := f.swap(rep, mine, ok)
	if err == nil {
		kind = agree.Kind(mine.Record).String()
		if what, ok := agree.Explain(rank, theirs, me, mine); ok {
			return kind, what
		}
		err = errors.New("the records are equal (a digest collision)")
	}
	return "collective", fmt.Sprintf("rank %d called it with other arguments than rank %d (argument digests %08x vs %08x: "+
		"kind, type, count, op, root, in-place, pool offsets and path must match; which one differs is unknown: %v; symmem.Options.Checked names it)",
		rank, me, rep.theirs, rep.mine, err)
}

// swap publishes this rank's record of the reported call (empty if
// it is no longer among the recent calls) and returns the peer's, waiting
// at most faultSwapWait. Keys are the group's, by digest and rank: a
// record is the same whenever its digest is, so a key left by an
// earlier report is still right (they stay in the store, 48 bytes each,
// one per differing call and rank).
func (f *faults) swap(rep faultReport, mine agree.Call, have bool) (agree.Call, error) {
	g := f.g
	var theirs agree.Call
	switch {
	case g.Store == nil:
		return theirs, errors.New("no store to swap records through")
	case rep.peer < 0 || rep.peer >= len(g.Ranks) || rep.peer == g.Me:
		return theirs, fmt.Errorf("the report names no peer (%d)", rep.peer)
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(faultSwapWait, g.Timeout))
	defer cancel()
	var val []byte
	if have {
		val = mine.Append(make([]byte, 0, agree.RecordBytes+len(mine.Path)))
	}
	if err := g.Store.Set(ctx, f.key(rep.mine, g.Me), val); err != nil {
		return theirs, fmt.Errorf("publishing this rank's record: %w", err)
	}
	vals, err := g.Store.Wait(ctx, f.key(rep.theirs, rep.peer))
	if err != nil {
		return theirs, fmt.Errorf("rank %d's record: %w", g.Ranks[rep.peer], err)
	}
	if len(vals[0]) == 0 {
		return theirs, fmt.Errorf("rank %d no longer holds that call's arguments", g.Ranks[rep.peer])
	}
	if theirs, err = agree.DecodeCall(vals[0]); err != nil {
		return theirs, fmt.Errorf("rank %d sent %w", g.Ranks[rep.peer], err)
	}
	if agree.Digest(theirs) != rep.theirs {
		return theirs, fmt.Errorf("rank %d's record does not have the reported digest", g.Ranks[rep.peer])
	}
	if !have {
		return theirs, errors.New("this rank no longer holds that call's arguments")
	}
	return theirs, nil
}

// key is where group rank r publishes its record of the call with
// digest d.
func (f *faults) key(d uint32, r int) string {
	return f.g.Prefix + "/mismatch/" + strconv.FormatUint(uint64(d), 16) + "/" + strconv.Itoa(r)
}

// put writes the header fields every kernel reads the same way: the
// watchdog, the call's digest, where a mismatch is reported and the word
// that ends the kernels' waits (the gate's failed word; 0 without a gate).
func (f *faults) put(a *cudadrv.Args, req backend.Request) {
	a.PutU64(argTimeout, uint64(f.g.b.watchdog.Nanoseconds()))
	a.PutU32(argHash, f.digest(&req))
	var dev uint64
	if f.words != nil {
		dev = f.words.Device()
	}
	a.PutU64(argFault, dev)
	a.PutU64(argStop, f.g.gate.stopWord())
}
