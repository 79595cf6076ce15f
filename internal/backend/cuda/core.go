package cuda

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// core is what a group's paths share: the members, what setup decided and
// made (caps, the peer table, the streams, the agreements, the gate,
// NCCL's communicators), and what Run holds while it issues a call (runMu,
// the program, broken).
type core struct {
	members.Head
	b *Backend

	caps caps // what the group can use, decided at setup (topology.go)

	peers peerTable // every rank's pad and registered segments as mapped here (peers.go)

	ag agreements // the in-band agreements among members on this host (agreement.go)

	runMu  sync.Mutex
	prog   *cudadrv.Program
	st     streams // side streams, their events and quiesce's fences (streams.go)
	broken error
	hs     checkedHandshake // checked mode's handshake (handshake.go; no block without kernels, caps.kernWhy says why)
	faults faults           // the kernels' mismatch reports (fault.go)
	gate   *callGate        // the call gate (gate.go; nil: ranks on several hosts, or no kernels)

	nccl ncclGroup
	x    executor // the driver and NCCL (edge.go)
	gen  int      // the name's generation (child groups of the hier path share it)

	watch hostWatch // the stop of a group that spans hosts (spanning.go)
}

// breakWith marks the group broken by err (the first cause stays): every
// later call is refused, and the peers on this host learn it at once from
// this rank's state word (members.StateFailed: their waits for this rank
// fail naming it, instead of timing out). The caller holds runMu.
func (g *core) breakWith(err error) {
	if g.broken == nil {
		g.broken = err
	}
	g.ag.setState(members.StateFailed)
}

// newProgram is the group's program, emptied, for the call being built.
func (g *core) newProgram() *cudadrv.Program {
	p := g.prog
	p.Reset()
	p.SetContext(g.b.ctx)
	return p
}

// follow queues the wait that orders a call on stream s after the
// group's previous call on another stream (streams.follow); nothing where
// there is none to wait for. The caller holds runMu.
func (g *core) follow(s uint64) error {
	if g.st.stays(s) {
		return nil
	}
	mark, record, err := g.st.follow(s, g.b.stream, g.x, g.b.ctx)
	if err != nil || mark == 0 {
		return err
	}
	p := g.newProgram()
	if record {
		p.Record(g.b.stream.Handle(), mark)
	}
	p.WaitEvent(s, mark)
	if err := g.x.program(p); err != nil {
		return fmt.Errorf("ordering after the group's previous call: %w", err)
	}
	return nil
}

// issue tracks and executes p, the whole of call c (or what goes before or
// after an NCCL call), on c's stream. A failure leaves the peers waiting
// for signals this rank will not send: the group cannot go on.
func (g *core) issue(p *cudadrv.Program, c *call, what string) error {
	if err := g.st.track(p, c.req.Stream, g.b.stream, g.b.ctx); err != nil {
		return err
	}
	if err := g.x.program(p); err != nil {
		// A kernel's report read now explains the failure where the
		// handshake trapped (take broke the group with it: the first cause
		// stays); an earlier call's mismatch does not, and this call was
		// not queued either way: the group breaks with the failure.
		ferr := g.faults.take()
		if c.gate.n > 0 { // the call's number at the gate, as its peers count it
			g.breakWith(fmt.Errorf("%v %s (collective %d on the group) failed: %w", c.req.Kind, what, c.gate.n, err))
		} else {
			g.breakWith(fmt.Errorf("%v %s failed: %w", c.req.Kind, what, err))
		}
		berr := fmt.Errorf("%w: %w", errs.Broken, g.broken)
		if ferr != nil && ferr != g.broken {
			return errors.Join(berr, ferr)
		}
		return berr
	}
	return nil
}

// errWorkInFlight is wrapped where the group's collectives did not finish
// within the timeout and what they may still use was kept (Deregister) or
// leaked (Close) rather than pulled from under them.
var errWorkInFlight = errors.New("collectives still in flight")

// quiesce waits (bounded by the timeout) until every collective issued so
// far (outside graph capture) finished (streams.quiesce), under runMu.
func (g *core) quiesce(ctx context.Context) error {
	g.runMu.Lock()
	defer g.runMu.Unlock()
	return g.st.quiesce(ctx, g.b.stream, g.Timeout)
}

// exchange sends fd to every peer under tag and imports every peer's fd of
// the same size, mapped for this device. Indexed by group rank (0 for me).
func (g *core) exchange(ctx context.Context, tag string, fd int, size int64) ([]uint64, error) {
	bases := make([]uint64, len(g.Ranks))
	err := g.Swap(ctx, tag, fd, func(r, fd int) error {
		p, err := importPeer(g.b.ctx, fd, size, g.b.gran)
		bases[r] = p
		return err
	})
	if err != nil {
		for r, p := range bases {
			if p != 0 && r != g.Me {
				cudadrv.Unmap(g.b.ctx, p, size)
			}
		}
		return nil, err
	}
	return bases, nil
}
