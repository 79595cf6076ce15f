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
	"time"

	"github.com/symmem/symmem/internal/errs"

	"golang.org/x/sys/unix"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/backend/shm/plan"
	"github.com/symmem/symmem/internal/native/hostmem"
	"github.com/symmem/symmem/internal/wait"
	"github.com/symmem/symmem/pool"
	"github.com/symmem/symmem/rendezvous"
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
	b       *Backend
	name    string
	ranks   []int // global ranks by group rank
	me      int   // group rank
	store   *rendezvous.Client
	fdx     *rendezvous.FDExchange
	timeout time.Duration
	prefix  string // store key and fd tag namespace
	crew    *crew  // goroutines for the data steps of a stage

	ag *members.Gather

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
	me, err := cfg.Index()
	if err != nil {
		return nil, fmt.Errorf("shm: %w", err)
	}
	switch {
	case len(cfg.Ranks) > 1 && cfg.FDs == nil:
		return nil, fmt.Errorf("shm: group %q: GroupConfig.FDs is nil (the CPU backend passes memfds between ranks)", cfg.Name)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = wait.DefaultTimeout
	}
	g := &Group{
		b: b, name: cfg.Name, ranks: append([]int(nil), cfg.Ranks...), me: me,
		store: cfg.Store, fdx: cfg.FDs, timeout: cfg.Timeout,
		prefix: members.Prefix("shm", b.env.JobID, cfg.Name, gen),
		plans:  map[plan.Spec]plan.Plan{},
		crew:   newCrew(splitFor(b.env.LocalWorldSize)),
	}
	g.ag = members.NewGather(fmt.Sprintf("shm: group %q", g.name), g.store, g.prefix, g.ranks, g.me, g.timeout)
	g.ag.Watch(g.watchable)
	n := len(g.ranks)
	g.pidfds = make([]int, n)
	g.pids = make([]int, n)
	for i := range g.pidfds {
		g.pidfds[i] = -1
	}
	if g.pads, err = newPads(n, me); err != nil {
		return nil, fmt.Errorf("shm: group %q: %w", g.name, err)
	}
	g.pads.spin = waitSpin(b.env.LocalWorldSize)
	if err := g.setup(ctx); err != nil {
		g.Close()
		return nil, fmt.Errorf("shm: group %q (rank %d): %w", g.name, cfg.Rank, err)
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
				g.ranks[r], h, host, errs.NotSupported)
		}
	}
	for r, v := range all {
		if r == g.me {
			continue
		}
		_, pid, _ := strings.Cut(string(v), "|")
		if g.pids[r], err = strconv.Atoi(pid); err != nil {
			return fmt.Errorf("rank %d sent a bad pid %q", g.ranks[r], pid)
		}
		if g.pidfds[r], err = unix.PidfdOpen(g.pids[r], 0); errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("rank %d (pid %d) exited during the group's setup: %w", g.ranks[r], g.pids[r], errs.PeerExited)
		} else if err != nil {
			return fmt.Errorf("rank %d (pid %d): pidfd_open: %w", g.ranks[r], g.pids[r], err)
		}
	}
	mems, err := g.exchange(ctx, "pad", g.pads.fd, padSize(len(g.ranks)))
	if err != nil {
		return fmt.Errorf("signal pads: %w", err)
	}
	for r, m := range mems {
		if r != g.me {
			g.pads.peers[r] = m
		}
	}
	g.ready.Store(true)
	return nil
}

// Rank is this process's rank in the group.
func (g *Group) Rank() int { return g.me }

// Size is the number of ranks in the group.
func (g *Group) Size() int { return len(g.ranks) }

// Name is the group's name.
func (g *Group) Name() string { return g.name }

// Ranks returns the members' global ranks by group rank.
func (g *Group) Ranks() []int { return append([]int(nil), g.ranks...) }

// AllGather returns every member's bytes by group rank, through the store.
// Members call it in the same order. Keys live under the group's namespace
// and the last rank to finish deletes them all.
func (g *Group) AllGather(ctx context.Context, mine []byte) ([][]byte, error) {
	if err := g.failFast(); err != nil {
		return nil, err
	}
	return g.ag.AllGather(ctx, mine)
}

// exchange sends fd to every peer under tag and maps every peer's fd of the
// same size. The result is indexed by group rank (nil for this rank).
func (g *Group) exchange(ctx context.Context, tag string, fd int, size int64) ([][]byte, error) {
	mems := make([][]byte, len(g.ranks))
	err := members.Swap(ctx, g.fdx, g.prefix, tag, g.ranks, g.me, g.timeout, fd, func(r, fd int) error {
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
	if err := g.segs.Fresh(g.name, seg.ID); err != nil {
		return fmt.Errorf("shm: %w", err)
	}
	fd, err := g.b.prov.fd(seg.ID)
	if err != nil {
		return fmt.Errorf("shm: group %q: register: %w", g.name, err)
	}
	mems, err := g.exchange(ctx, "seg/"+strconv.FormatUint(uint64(seg.ID), 10), fd, seg.Size)
	if err != nil {
		return fmt.Errorf("shm: group %q: register segment %d: %w", g.name, seg.ID, err)
	}
	ps := &peerSeg{size: seg.Size, bases: make([]uint64, len(g.ranks)), maps: mems}
	for r, m := range mems {
		ps.bases[r] = hostmem.Addr(m)
	}
	ps.bases[g.me] = seg.Base
	g.segs.Add(seg.ID, ps)
	return nil
}

// Deregister unmaps the peers' copies of seg.
func (g *Group) Deregister(ctx context.Context, seg pool.Segment) error {
	ps, ok := g.segs.Remove(seg.ID)
	if !ok {
		return fmt.Errorf("shm: group %q: deregister of segment %d, which is not registered", g.name, seg.ID)
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
		return &PeerExitedError{Rank: g.ranks[r], Pid: g.pids[r]}
	}
	return nil
}

// Close unmaps every peer mapping and the signal pads and closes the pidfds.
// It is local (not collective) and idempotent.
func (g *Group) Close() error {
	g.closeOnce.Do(func() {
		g.ag.Unwatch()
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
			g.broken = fmt.Errorf("shm: group %q is closed: %w", g.name, errs.Broken)
		}
		g.crew.stop()
		g.runMu.Unlock()
		g.b.forget(g)
	})
	return nil
}
