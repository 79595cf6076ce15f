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
	"github.com/symmem/symmem/rendezvous"
)

// ErrSharedDevice is wrapped when ranks of a group use one GPU and sharing
// was not allowed (Options.ShareDevice). It matches errs.NotSupported too.
var ErrSharedDevice = fmt.Errorf("cuda: ranks share a GPU: %w", errs.NotSupported)

// Group is the GPU backend side of one group.
type Group struct {
	members.Head
	b *Backend

	caps caps // what the group can use, decided at setup (topology.go)

	peers peerTable // every rank's pad and registered segments as mapped here (peers.go)

	ag agreements // the in-band agreements among members on this host (agreement.go)

	runMu  sync.Mutex
	paths  paths // every path, symmem's and NCCL's (path.go)
	prog   *cudadrv.Program
	st     streams // side streams, their events and quiesce's fences (streams.go)
	broken error
	hs     handshake // checked mode's handshake (handshake.go; no block without kernels, caps.kernWhy says why)
	faults faults    // the kernels' mismatch reports (fault.go)
	gate   *callGate // the call gate (gate.go; nil: ranks on several hosts, or no kernels)

	nccl ncclGroup
	x    executor // the driver and NCCL (edge.go)
	gen  int      // the name's generation (child groups of the hier path share it)

	watch hostWatch // the stop of a group that spans hosts (spanning.go)

	closeOnce sync.Once
}

var _ backend.Group = (*Group)(nil)

// pad layout: word (slot, from) at 4*(slot*n + from); slots below.
const (
	slotReady = 0
	slotDone  = 1
	padSlots  = 2
)

func newGroup(ctx context.Context, b *Backend, cfg backend.GroupConfig, gen int) (*Group, error) {
	head, err := members.NewHead("cuda", b.env.JobID, cfg, gen)
	if err != nil {
		return nil, err
	}
	g := &Group{Head: head, b: b, prog: cudadrv.NewProgram(64), x: driver{}, gen: gen}
	g.faults, g.hs = faults{g: g}, handshake{g: g}
	g.paths.init(g)
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
	kern := g.loadKernel()
	// The gate's guard needs only the modules, not the kernels' rank limit.
	guard := kern || g.b.loadKernels() == nil
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
	g.paths.hier.init(t)
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
	if err := g.reachPeers(all, t, g.probeP2P); err != nil {
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
		if g.gate, err = newCallGate(g); err != nil {
			return err
		}
	}
	if g.caps.sharing != "" {
		g.nccl = ncclGroup{err: fmt.Errorf("rank(s)%s share GPU %s with this rank and NCCL needs one GPU per rank", g.caps.sharing, g.b.info.PCI),
			winWhy: "no NCCL on a shared GPU"}
	} else {
		g.nccl = newNCCLGroup(ctx, g, gen)
	}
	if err := g.agreeNCCL(ctx); err != nil {
		return err
	}
	if g.caps.sharing != "" {
		return nil
	}
	if presences != nil { // once the communicators exist: abortGroup aborts them
		comms := []*bnccl.Comm{g.nccl.comm, g.nccl.plain} // Close clears the fields; the comms stay safe to abort
		g.watch.unwatch = presences.OnGone(g.Ranks, func(err error) { g.abortGroup(err, comms) })
		if g.ag.host != nil && g.gate == nil {
			g.gate = hostGate(g, func(err error) { g.abortGroup(err, comms) })
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
// (hidden: why it is not visible), and whether this rank's device reaches
// it.
func (g *Group) probeP2P(pci string) (dev int, access bool, hidden, err error) {
	if dev, hidden = deviceByPCI(pci); hidden != nil {
		return 0, false, hidden, nil
	}
	link, err := cudadrv.P2P(g.b.info.Ordinal, dev)
	return dev, link.Access, nil, err
}

// reachPeers decides whether copy engines serve the group (g.caps.ce, g.caps.ceWhy)
// and which members share this rank's GPU (g.caps.sharing): t's peers in group
// order, probe's answer for each on another GPU, up to the first it
// cannot reach; then t.remote.
func (g *Group) reachPeers(all []identity, t topology, probe func(pci string) (dev int, access bool, hidden, err error)) error {
	g.caps.ce, g.caps.ceWhy = true, "every rank is on this host and P2P-reachable"
	if g.FDs == nil && len(g.Ranks) > 1 {
		g.caps.ce, g.caps.ceWhy = false, "no fd exchange to share segments"
		return nil
	}
	for _, p := range t.peers {
		id := all[p.member]
		if p.sameGPU { // peer mappings and copy engines work
			if !g.b.share {
				return fmt.Errorf("rank %d uses the same GPU (%s) as this rank: give each rank its own device, or let ranks share it "+
					"(symmem.Options.GPU.ShareDevice, %s=1, or `symmem launch --share-device`; symmem's own paths only, NCCL needs a GPU per rank): %w",
					id.Rank, id.PCI, rendezvous.VarShareDevice, ErrSharedDevice)
			}
			g.caps.sharing += fmt.Sprintf(" %d", id.Rank)
			continue
		}
		dev, access, hidden, err := probe(id.PCI)
		switch {
		case hidden != nil:
			g.caps.ce, g.caps.ceWhy = false, fmt.Sprintf("rank %d's GPU %s is not visible here (%v)", id.Rank, id.PCI, hidden)
			return nil
		case err != nil:
			return err
		case !access:
			g.caps.ce, g.caps.ceWhy = false, fmt.Sprintf("device %d cannot access rank %d's device %d (no P2P)", g.b.info.Ordinal, id.Rank, dev)
			return nil
		}
	}
	if t.remote >= 0 {
		g.caps.ce, g.caps.ceWhy = false, fmt.Sprintf("rank %d runs on another host", all[t.remote].Rank)
	}
	return nil
}

// setupCE creates the side streams, events and signal pads.
func (g *Group) setupCE(ctx context.Context) error {
	c := g.b.ctx
	if err := g.st.create(c, max(3, len(g.Ranks)-1)); err != nil {
		return err
	}
	g.hs.stream, g.hs.ev = g.st.check.Handle(), [2]uint64{g.st.checkEv[0].Handle(), g.st.checkEv[1].Handle()}
	if err := g.peers.createPad(c, len(g.Ranks), g.b.gran); err != nil {
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
