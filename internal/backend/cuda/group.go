package cuda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/backend/internal/members"
	bnccl "github.com/symmem/symmem/internal/backend/nccl"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// Group is the GPU backend side of one group: its core, which the paths
// share, and the paths.
type Group struct {
	core
	paths     pathSet // every path, symmem's and NCCL's (pathtable.go)
	closeOnce sync.Once
}

var _ backend.Group = (*Group)(nil)

func newGroup(ctx context.Context, b *Backend, cfg backend.GroupConfig, gen int) (*Group, error) {
	head, err := members.NewHead("cuda", b.env.JobID, cfg, gen)
	if err != nil {
		return nil, err
	}
	g := &Group{core: core{Head: head, b: b, prog: cudadrv.NewProgram(64), x: driver{}, gen: gen}}
	g.faults, g.hs = faults{g: &g.core}, checkedHandshake{g: &g.core}
	g.paths.init(&g.core)
	if err := g.setup(ctx, gen); err != nil {
		g.Close()
		return nil, fmt.Errorf("cuda: group %q (rank %d): %w", g.GroupName, cfg.Rank, err)
	}
	return g, nil
}

// setup exchanges the members' identities, decides from them what the
// group's paths may do (topology), finds out whether copy engines can
// serve the group, creates and exchanges the signal pads, and creates the
// NCCL communicator.
func (g *Group) setup(ctx context.Context, gen int) error {
	kern, kernWhy := g.b.kern.forGroup(g.b.ctx, len(g.Ranks))
	g.caps.kernWhy = kernWhy
	// The gate's guard needs only the modules, not the kernels' rank limit.
	guard := kern || g.b.kern.load(g.b.ctx) == nil
	mine, err := json.Marshal(identity{Rank: g.Ranks[g.Me], Host: g.b.env.HostID(), PCI: g.b.info.PCI, Kern: kern, Guard: guard})
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	raw, err := g.AllGather(ctx, mine)
	if err != nil {
		return err
	}
	all, err := decodeIdentities(raw, g.Ranks)
	if err != nil {
		return err
	}
	t := newTopology(all, g.Me)
	g.paths.hier.decide(t)
	// Every rank must agree on the paths `auto` may take, and on whether
	// calls go through the gate.
	if kern && !t.kern {
		kern, g.caps.kernWhy = false, t.kernWhy
	}
	guard = t.guard
	sameHost := g.FDs != nil && len(g.Ranks) > 1 && !t.spans
	var presences *members.Presences // members on other hosts: what watches them
	switch {
	case sameHost:
		if g.ag.group, err = members.NewHostAgreement(ctx, fmt.Sprintf("cuda: group %q", g.GroupName), g.FDs, g.Prefix, g.Ranks, g.Me, g.Timeout); err != nil {
			return err
		}
		g.Gather.Watch(g.ag.group.Gone)
	case len(g.Ranks) > 1: // ranks on other hosts: their presences in the store
		if presences, err = g.b.watchHosts(ctx, g.Store); err != nil {
			return err
		}
		ranks := g.Ranks
		g.Gather.Watch(func(q int, _ bool) error { return presences.Gone(ranks[q]) })
		if t.spans {
			g.b.nccl.spanHosts()
			if err := g.ag.joinHost(ctx, &g.Head, t.local); err != nil {
				return err
			}
		}
	}
	from := g.b.info.Ordinal
	probe := func(pci string) (int, bool, error, error) { return probeP2P(from, pci) }
	if err := g.caps.reach(all, t, g.FDs != nil, g.b.share, from, probe); err != nil {
		return err
	}
	if g.caps.ce {
		if err := g.setupCE(ctx); err != nil {
			return err
		}
		if kern {
			if g.faults.words, err = cudadrv.NewHostMapped(g.b.ctx, faultWords); err != nil {
				return fmt.Errorf("kernel mismatch report: %w", err)
			}
			g.paths.withKernels()
			g.hs.args = cudadrv.NewArgs(kernArgBytes)
			g.hs.fill()
		}
	} else if kern {
		g.caps.kernWhy = "it needs peer mappings: " + g.caps.ceWhy
	}
	if guard { // every rank has the guard, so every rank publishes at the gate
		if g.gate, err = newCallGate(&g.core); err != nil {
			return err
		}
	}
	if g.caps.sharing != "" {
		g.nccl = ncclGroup{err: fmt.Errorf("rank(s)%s share GPU %s with this rank and NCCL needs one GPU per rank", g.caps.sharing, g.b.info.PCI),
			winWhy: "no NCCL on a shared GPU"}
	} else {
		g.nccl = newNCCLGroup(ctx, &g.core, gen)
	}
	if err := g.nccl.agree(ctx, &g.Head); err != nil {
		return err
	}
	if g.caps.sharing != "" {
		return nil
	}
	if presences != nil { // once the communicators exist: abortGroup aborts them
		comms := []*bnccl.Comm{g.nccl.comm, g.nccl.plain} // Close clears the fields; the comms stay safe to abort
		g.watch.unwatch = presences.OnGone(g.Ranks, func(err error) { g.abortGroup(err, comms) })
		if g.ag.host != nil && g.gate == nil {
			g.gate = hostGate(&g.core, func(err error) { g.abortGroup(err, comms) })
		}
		if t.spans {
			// Every rank posts and reads two neighbours' posts each tick:
			// fewer ticks for larger groups keep the store's load flat.
			tick := members.LogTick * time.Duration(max(1, len(g.Ranks)/16))
			g.watch.calls = members.NewCallLog(fmt.Sprintf("cuda: group %q", g.GroupName), g.Store, g.Prefix, g.Ranks, g.Me, tick,
				func(err error) { g.abortGroup(err, comms) })
		}
	}
	return nil
}

// probeP2P is the driver's answer for the GPU at pci: its ordinal here
// (hidden: why it is not visible), and whether device from (this rank's)
// reaches it.
func probeP2P(from int, pci string) (dev int, access bool, hidden, err error) {
	if dev, hidden = deviceByPCI(pci); hidden != nil {
		return 0, false, hidden, nil
	}
	link, err := cudadrv.P2P(from, dev)
	return dev, link.Access, nil, err
}

// setupCE creates the side streams, events and signal pads.
func (g *core) setupCE(ctx context.Context) error {
	c := g.b.ctx
	if err := g.st.create(c, max(3, len(g.Ranks)-1)); err != nil {
		return err
	}
	g.hs.stream, g.hs.ev = g.st.check.Handle(), [2]uint64{g.st.checkEv[0].Handle(), g.st.checkEv[1].Handle()}
	if err := g.peers.createPad(c, padBytes(len(g.Ranks), g.b.gran), g.b.gran); err != nil {
		return err
	}
	pad := g.peers.pad
	bases, err := g.exchange(ctx, "pad", pad.fd, pad.size)
	if err != nil {
		return fmt.Errorf("signal pads: %w", err)
	}
	bases[g.Me] = pad.base
	g.peers.pads = bases
	return nil
}

// deviceByPCI finds the visible device with the given PCI id.
func deviceByPCI(pci string) (int, error) {
	n, err := cudadrv.DeviceCount()
	if err != nil {
		return -1, err
	}
	for d := 0; d < n; d++ {
		info, err := cudadrv.Info(d)
		if err != nil {
			return -1, err
		}
		if info.PCI == pci {
			return d, nil
		}
	}
	return -1, fmt.Errorf("no visible device has PCI id %s", pci)
}

// Leave tells the peers that this rank is closing (World.Close or
// Group.Close): their waits for it fail at once with errs.PeerClosed,
// except the teardown's exchanges they make too.
func (g *Group) Leave() {
	g.paths.hier.leave()
	g.Gather.Leave()
	g.ag.setState(members.StateLeft)
}

// Close releases the group's mappings, pads, streams, events and NCCL
// communicator, past any step that fails (each failure is reported).
// Idempotent. Collective when the group has an NCCL communicator (NCCL
// finalizes it with the peers): every rank closes its groups in the same
// order. Where the group's collectives do not finish within the timeout,
// what they may use is leaked and the error wraps errWorkInFlight.
func (g *Group) Close() error {
	var err error
	g.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), g.Timeout)
		defer cancel()
		g.Gather.Unwatch()
		g.watch.close()
		g.ag.setState(members.StateLeft) // peers still waiting for this rank learn it at once
		herr := g.paths.hier.close()     // before quiesce: the children's calls end this group's hier calls
		qerr := g.quiesce(ctx)
		g.runMu.Lock()
		defer g.runMu.Unlock()
		if qerr != nil {
			// Streams may still read peer memory: leak mappings rather than
			// unmap memory in use.
			g.peers.segs.Drain()
			nerr := g.nccl.close(ctx)
			g.gate.close(false) // the page stays registered and mapped: a stream may wait on it
			g.b.mu.Lock()
			g.b.inFlight = true // the backend keeps the rest (Backend.Close)
			g.b.mu.Unlock()
			g.b.forget(g)
			err = fmt.Errorf("cuda: group %q: closing with %w (mappings, pads, streams and events leaked): %w", g.GroupName, errWorkInFlight, errors.Join(qerr, herr, nerr))
			return
		}
		// Best effort: every step runs whatever an earlier one returned,
		// and each failure is reported.
		errs := []error{herr}
		errs = g.peers.releaseSegs(errs, g.b.ctx, g.Me)
		errs = append(errs, g.nccl.close(ctx))
		errs = g.peers.releasePads(errs, g.b.ctx, g.Me)
		errs = g.st.destroyStreams(errs)
		for _, p := range g.paths.all {
			if r, ok := p.(releaser); ok {
				errs = append(errs, r.release())
			}
		}
		freeArgs(g.hs.args)
		if g.faults.words != nil {
			errs = append(errs, g.faults.words.Free())
		}
		errs = append(errs, g.gate.close(true))
		g.ag.close()
		errs = g.st.destroyEvents(errs)
		if e := errors.Join(errs...); e != nil {
			err = fmt.Errorf("cuda: group %q: close: %w", g.GroupName, e)
		}
		g.b.forget(g)
	})
	return err
}

// Agreer is the group's in-band agreement (pool.Group): where every rank
// shares this host, the host page compares records (scope ends, empty
// calls) in about a microsecond instead of a store round trip; nil
// otherwise (the store).
func (g *Group) Agreer() agree.Agreer {
	if g.ag.group == nil {
		return nil
	}
	return g.ag.group
}

// Fault reports a mismatch the group's kernels found since the last call
// (Synchronize asks every group). The usual answer, none, costs one atomic
// load and no lock: it runs after every collective.
func (g *Group) Fault() error {
	if w := g.faults.words; w == nil || w.Load(faultSet) == 0 {
		return nil
	}
	g.runMu.Lock()
	defer g.runMu.Unlock()
	return g.faults.take()
}

// abortGroup stops a group that spans hosts, once: when a member on
// another host exited (members.Presences.OnGone), or when this host's
// members differ or one is gone (hostGate). Later calls and Synchronize
// fail with err, and the group's NCCL communicators are stopped
// (bnccl.Comm.Stop: revoked, or aborted before NCCL 2.28), which ends NCCL
// kernels waiting for the gone rank instead of leaving the stream blocked
// until the process is killed; so are the hier path's child groups.
// Synchronize returns err at once while the group is open (after an abort
// the stream drains only when NCCL's teardown completes). Nothing else
// waits across hosts: symmem's kernels and copy engines do not run on such
// groups.
func (g *Group) abortGroup(err error, comms []*bnccl.Comm) {
	if !g.watch.stop(fmt.Errorf("cuda: group %q: %w", g.GroupName, err)) {
		return
	}
	g.paths.hier.stop(err) // children in the making: their wait for peers ends
	if k := g.paths.hier.kids.Load(); k != nil {
		k.abort(err)
	}
	// Synchronize returns the abort's error now, not when NCCL's teardown lets the stream go.
	g.b.fireAborted()
	differ := errors.Is(err, errs.Mismatch) // NCCL may have run calls that differ: its state is undefined
	for _, c := range comms {
		switch { // each waits for a call in progress on the communicator; nothing after Close
		case c == nil:
		case differ:
			c.Abandon()
		default:
			c.Stop()
		}
	}
}
