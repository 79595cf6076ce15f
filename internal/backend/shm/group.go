package shm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/symmem/symmem/internal/errs"

	"golang.org/x/sys/unix"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/backend/shm/plan"
	"github.com/symmem/symmem/internal/native/hostmem"
	"github.com/symmem/symmem/pool"
)

// PeerExitedError says which peer exited; it matches errs.PeerExited.
type PeerExitedError struct {
	Rank, Pid int // world rank and process id
}

func (e *PeerExitedError) Error() string {
	return fmt.Sprintf("rank %d (pid %d) exited: %v", e.Rank, e.Pid, errs.PeerExited)
}

func (e *PeerExitedError) Unwrap() error { return errs.PeerExited }

// Group is the CPU backend side of one group of local ranks.
type Group struct {
	members.Head
	b    *Backend
	crew *crew // goroutines for the data steps of a stage

	pidfds []int // peers' pidfds by group rank (-1 for me)
	pids   []int

	segs members.Segments[*peerSeg] // registered segments

	runMu sync.Mutex // one collective at a time; guards everything below
	pads  *pads
	epoch uint32 // epoch base E of the plan protocol, equal on all ranks
	plans map[plan.Spec]plan.Plan
	last  struct { // the last plan used: back-to-back calls repeat it
		spec plan.Spec
		p    plan.Plan
		ok   bool
	}
	x       exec     // the call in progress
	tasks   []task   // the stage in progress (execute)
	srcs    [][]byte // its tasks' sources
	scratch []byte
	broken  error
	failed  atomic.Pointer[error] // broken by a failure (not by Close), read without runMu
	ready   atomic.Bool           // setup mapped the peers' pads (watchable)
	calls   uint64
	records uint64 // records written to the pad (agree.go)

	closeOnce sync.Once
}

// peerSeg is every rank's mapping of one registered segment.
type peerSeg struct {
	size  int64
	bases []uint64 // by group rank; bases[me] is this rank's own segment
	maps  [][]byte // peers' mappings (nil for me)
}

var _ backend.Group = (*Group)(nil)

func newGroup(ctx context.Context, b *Backend, cfg backend.GroupConfig, gen int) (*Group, error) {
	head, err := members.NewHead("shm", b.env.JobID, cfg, gen)
	if err != nil {
		return nil, err
	}
	if len(cfg.Ranks) > 1 && cfg.FDs == nil {
		return nil, fmt.Errorf("shm: group %q: GroupConfig.FDs is nil (the CPU backend passes memfds between ranks)", cfg.Name)
	}
	g := &Group{Head: head, b: b, plans: map[plan.Spec]plan.Plan{}, crew: newCrew(splitFor(b.env.LocalWorldSize))}
	g.Gather.Watch(g.watchable)
	n := len(g.Ranks)
	g.pidfds = make([]int, n)
	g.pids = make([]int, n)
	for i := range g.pidfds {
		g.pidfds[i] = -1
	}
	if g.pads, err = newPads(n, g.Me); err != nil {
		return nil, fmt.Errorf("shm: group %q: %w", g.GroupName, err)
	}
	g.pads.spin = waitSpin(b.env.LocalWorldSize)
	if err := g.setup(ctx); err != nil {
		g.Close()
		return nil, fmt.Errorf("shm: group %q (rank %d): %w", g.GroupName, cfg.Rank, err)
	}
	return g, nil
}

// setup checks that every member runs on this host, opens pidfds for the
// peers and exchanges signal pads.
func (g *Group) setup(ctx context.Context) error {
	host := g.b.env.HostID()
	all, err := g.AllGather(ctx, []byte(host+"|"+strconv.Itoa(os.Getpid())))
	if err != nil {
		return err
	}
	// Every host first: a rank that found another host fails and exits,
	// and its peers must say why rather than that its pid is gone.
	for r, v := range all {
		if h, _, _ := strings.Cut(string(v), "|"); h != host {
			return fmt.Errorf("rank %d runs on host %q, this rank on %q: the CPU backend is single-host (its ranks share memory pages): start every rank of the job on one host: %w",
				g.Ranks[r], h, host, errs.NotSupported)
		}
	}
	for r, v := range all {
		if r == g.Me {
			continue
		}
		_, pid, _ := strings.Cut(string(v), "|")
		if g.pids[r], err = strconv.Atoi(pid); err != nil {
			return fmt.Errorf("rank %d sent a bad pid %q", g.Ranks[r], pid)
		}
		if g.pidfds[r], err = unix.PidfdOpen(g.pids[r], 0); errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("rank %d (pid %d) exited during the group's setup: %w", g.Ranks[r], g.pids[r], errs.PeerExited)
		} else if err != nil {
			return fmt.Errorf("rank %d (pid %d): pidfd_open: %w", g.Ranks[r], g.pids[r], err)
		}
	}
	mems, err := g.exchange(ctx, "pad", g.pads.fd, padSize(len(g.Ranks)))
	if err != nil {
		return fmt.Errorf("signal pads: %w", err)
	}
	for r, m := range mems {
		if r != g.Me {
			g.pads.peers[r] = m
		}
	}
	g.ready.Store(true)
	return nil
}

// AllGather is Head's, failing at once on a group that failed. Keys live
// under the group's namespace and the last rank to finish deletes them all.
func (g *Group) AllGather(ctx context.Context, mine []byte) ([][]byte, error) {
	if err := g.failFast(); err != nil {
		return nil, err
	}
	return g.Gather.AllGather(ctx, mine)
}

// exchange sends fd to every peer under tag and maps every peer's fd of the
// same size. The result is indexed by group rank (nil for this rank).
func (g *Group) exchange(ctx context.Context, tag string, fd int, size int64) ([][]byte, error) {
	mems := make([][]byte, len(g.Ranks))
	err := g.Swap(ctx, tag, fd, func(r, fd int) error {
		m, err := mapPeer(fd, size)
		mems[r] = m
		return err
	})
	if err != nil {
		for _, m := range mems {
			if m != nil {
				unix.Munmap(m)
			}
		}
		return nil, err
	}
	return mems, nil
}

// Register maps every peer's copy of seg (collective over the group).
func (g *Group) Register(ctx context.Context, seg pool.Segment) error {
	if err := g.segs.Fresh(g.GroupName, seg.ID); err != nil {
		return fmt.Errorf("shm: %w", err)
	}
	fd, err := g.b.prov.fd(seg.ID)
	if err != nil {
		return fmt.Errorf("shm: group %q: register: %w", g.GroupName, err)
	}
	mems, err := g.exchange(ctx, "seg/"+strconv.FormatUint(uint64(seg.ID), 10), fd, seg.Size)
	if err != nil {
		return fmt.Errorf("shm: group %q: register segment %d: %w", g.GroupName, seg.ID, err)
	}
	ps := &peerSeg{size: seg.Size, bases: make([]uint64, len(g.Ranks)), maps: mems}
	for r, m := range mems {
		ps.bases[r] = hostmem.Addr(m)
	}
	ps.bases[g.Me] = seg.Base
	g.segs.Add(seg.ID, ps)
	return nil
}

// Deregister unmaps the peers' copies of seg.
func (g *Group) Deregister(ctx context.Context, seg pool.Segment) error {
	ps, ok := g.segs.Remove(seg.ID)
	if !ok {
		return fmt.Errorf("shm: group %q: deregister of segment %d, which is not registered", g.GroupName, seg.ID)
	}
	ps.unmap()
	return nil
}

func (ps *peerSeg) unmap() {
	for _, m := range ps.maps {
		if m != nil {
			unix.Munmap(m)
		}
	}
}

// Registered is the number of segments registered with the group.
func (g *Group) Registered() int {
	return g.segs.Len()
}

// exited returns an error wrapping errs.PeerExited if group rank r has exited.
func (g *Group) exited(r int) error {
	if members.PidfdExited(g.pidfds[r]) {
		return &PeerExitedError{Rank: g.Ranks[r], Pid: g.pids[r]}
	}
	return nil
}

// Close unmaps every peer mapping and the signal pads and closes the pidfds.
// It is local (not collective) and idempotent.
func (g *Group) Close() error {
	g.closeOnce.Do(func() {
		g.Gather.Unwatch()
		g.runMu.Lock()
		g.pads.setState(members.StateLeft) // peers still waiting for this rank learn it at once
		for _, ps := range g.segs.Drain() {
			ps.unmap()
		}
		if g.pads != nil {
			g.pads.close()
		}
		for i, fd := range g.pidfds {
			if fd >= 0 {
				unix.Close(fd)
				g.pidfds[i] = -1
			}
		}
		if g.broken == nil {
			g.broken = fmt.Errorf("shm: group %q is closed: %w", g.GroupName, errs.Broken)
		}
		g.crew.stop()
		g.runMu.Unlock()
		g.b.forget(g)
	})
	return nil
}
