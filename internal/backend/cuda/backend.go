package cuda

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/internal/tune"
	"github.com/symmem/symmem/pool"
	"github.com/symmem/symmem/rendezvous"
)

// Options configures the backend.
type Options struct {
	// Device is the CUDA ordinal this rank uses when PinDevice is set; the
	// zero value picks LOCAL_RANK modulo the number of visible devices.
	Device    int
	PinDevice bool
	// NoNCCL disables NCCL (copy engines only); otherwise NCCL is loaded
	// when available and its absence is reported by NCCLStatus.
	NoNCCL bool
	// NCCLMulticast lets NCCL use NVLink multicast (NVLS). By default it
	// is off: NCCL_NVLS_ENABLE=0 is set when the variable is unset (a value
	// the user set is always kept); NCCLStatus says which.
	NCCLMulticast bool
	// Watchdog is how long one of symmem's kernels waits for a peer before
	// it traps, which fails the context (every later CUDA call errors)
	// instead of spinning forever on a rank that died. (A peer on this host
	// that exits is usually found sooner, by the call gate: the kernels then
	// stop waiting and the context stays.) 0 means
	// DefaultWatchdog. It is not the group timeout: a healthy peer may reach
	// a collective minutes late (rank 0 writing a checkpoint).
	Watchdog time.Duration
	// ShareDevice lets several ranks of a group use this GPU (one GPU on a
	// workstation, tests on a single-GPU machine). symmem's kernels and
	// copy engines run — kernels of different processes time-slice the GPU
	// unless MPS runs — and NCCL, which needs a GPU per rank, is reported
	// unavailable for such groups. Without it, sharing is refused.
	ShareDevice bool
	// LowContentionCTAs is the grid of the lc path's reduction kernel (it
	// sums while copy engines move the data); 0 means
	// DefaultLowContentionCTAs, at most 64.
	LowContentionCTAs int
	// AutoTable is the table auto reads before the built-in one (nil:
	// the built-in one alone). New refuses one measured elsewhere
	// (CheckAutoTable) with an error wrapping errs.Invalid.
	AutoTable *tune.Table
}

// DefaultWatchdog is the kernels' wait limit when Options.Watchdog is 0
// (PyTorch's NCCL watchdog also defaults to 10 minutes).
const DefaultWatchdog = 10 * time.Minute

const (
	// DefaultLowContentionCTAs is the lc path's reduction kernel's grid
	// when Options.LowContentionCTAs is 0: enough CTAs to sum at the copy
	// engines' pace, few enough to leave the SMs to the GEMMs beside.
	DefaultLowContentionCTAs = 8
	// MaxLowContentionCTAs is the largest grid Options.LowContentionCTAs
	// may ask for (the CTAs a signal region counts).
	MaxLowContentionCTAs = kernMaxCTAs
)

// Backend is the GPU backend of one rank.
type Backend struct {
	env    rendezvous.Env
	ctx    *cudadrv.Context
	info   cudadrv.DeviceInfo
	gran   int64
	prov   *Provider
	stream *cudadrv.Stream // the stream used when a request names none
	nccl   ncclState
	kern   kernelModules
	// watchdog is Options.Watchdog (kernel parameter).
	watchdog time.Duration
	share    bool        // Options.ShareDevice
	lcCTAs   int         // Options.LowContentionCTAs, defaulted
	table    *tune.Table // Options.AutoTable (nil: the built-in table alone)

	mu       sync.Mutex
	copyProg *cudadrv.Program    // Copy's program (under mu)
	local    map[uint64]*segment // AllocLocal's allocations by base
	groups   []*Group            // creation order: closing is collective (NCCL), so every rank closes in the same order
	making   sync.WaitGroup      // NewGroup calls in progress (Add under mu, while not closed)
	inFlight bool                // a group closed with its collectives still running (Group.Close)
	closed   bool
	// presences follows the ranks of other hosts (members.Presences),
	// announced at the first group that spans hosts; nil until then.
	presences *members.Presences
	// aborted ends at an abort of a group that spans hosts
	// (Group.abortGroup); Synchronize stops waiting for the stream then.
	// It is renewed once no open group is aborted (rearm): the abort of a
	// group the user closed stops no later Synchronize. Under mu.
	aborted      context.Context
	abortedFired context.CancelFunc
}

// fireAborted ends aborted (Group.abortGroup).
func (b *Backend) fireAborted() {
	b.mu.Lock()
	if b.abortedFired != nil {
		b.abortedFired()
	}
	b.mu.Unlock()
}

// rearm renews aborted where it ended and no group left open is aborted;
// the caller holds mu. An abort reaches the group (gone) before it ends
// aborted, so a renewal never hides an open group's abort.
func (b *Backend) rearm() {
	if b.aborted == nil || b.aborted.Err() == nil {
		return
	}
	for _, g := range b.groups {
		if g.watch.err() != nil {
			return
		}
	}
	b.aborted, b.abortedFired = context.WithCancel(context.Background())
}

// watchHosts returns the rank's presence in the job (announced on first
// use through store): what a group spanning hosts watches for ranks that
// exited, where pidfds do not reach.
func (b *Backend) watchHosts(ctx context.Context, store *rendezvous.Client) (*members.Presences, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.presences == nil {
		p, err := members.Announce(ctx, store, b.env.Rank, b.env.HostID())
		if err != nil {
			return nil, err
		}
		b.presences = p
	}
	return b.presences, nil
}

var _ backend.Backend = (*Backend)(nil)

// New opens the driver and the rank's device. It fails with an error
// matching errs.NotSupported where CUDA, VMM or POSIX-fd handles are missing.
func New(env rendezvous.Env, opts Options) (*Backend, error) {
	if opts.LowContentionCTAs < 0 || opts.LowContentionCTAs > kernMaxCTAs {
		return nil, fmt.Errorf("cuda backend: LowContentionCTAs %d: want 0 (the default, %d) to %d: %w",
			opts.LowContentionCTAs, DefaultLowContentionCTAs, kernMaxCTAs, errs.Invalid)
	}
	n, err := cudadrv.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("cuda backend: %w", err)
	}
	dev := env.LocalRank % n
	if opts.PinDevice {
		dev = opts.Device
	}
	info, err := cudadrv.Info(dev)
	if err != nil {
		return nil, fmt.Errorf("cuda backend: %w", err)
	}
	if !info.VMM || !info.PosixFD {
		return nil, fmt.Errorf("cuda backend: device %d (%s) lacks VMM (%v) or POSIX-fd handles (%v): %w", dev, info.Name, info.VMM, info.PosixFD, errs.NotSupported)
	}
	ctx, err := cudadrv.Retain(dev)
	if err != nil {
		return nil, fmt.Errorf("cuda backend: %w", err)
	}
	gran, err := cudadrv.Granularity(dev)
	if err != nil {
		ctx.Release()
		return nil, fmt.Errorf("cuda backend: %w", err)
	}
	s, err := cudadrv.NewStream(ctx, 0)
	if err != nil {
		ctx.Release()
		return nil, fmt.Errorf("cuda backend: %w", err)
	}
	if opts.Watchdog <= 0 {
		opts.Watchdog = DefaultWatchdog
	}
	if opts.LowContentionCTAs == 0 {
		opts.LowContentionCTAs = DefaultLowContentionCTAs
	}
	b := &Backend{env: env, ctx: ctx, info: info, gran: gran, prov: newProvider(ctx, gran), stream: s, watchdog: opts.Watchdog, share: opts.ShareDevice,
		lcCTAs: opts.LowContentionCTAs}
	b.aborted, b.abortedFired = context.WithCancel(context.Background())
	if opts.NoNCCL {
		b.nccl.err = fmt.Errorf("NCCL disabled by option")
	} else {
		b.nccl.load(opts.NCCLMulticast)
	}
	if t := opts.AutoTable; t != nil {
		if err := CheckAutoTable(t, b.Machine()); err != nil {
			b.Close()
			return nil, fmt.Errorf("cuda backend: %w", err)
		}
		b.table = t
	}
	return b, nil
}

// Machine describes this rank's machine the way auto tables record it:
// the device's name, the visible GPUs, the link between them (nvlink where
// every pair has native atomics, pcie where every pair has peer access
// only, else none), the driver and the loaded NCCL.
func (b *Backend) Machine() tune.Machine {
	m := tune.Machine{Backend: "cuda", GPU: b.info.Name, Link: "none"}
	m.Count, _ = cudadrv.DeviceCount()
	if v := cudadrv.DriverVersion(); v > 0 {
		m.Driver = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	if b.nccl.lib != nil {
		m.NCCL = b.nccl.lib.VersionString()
	}
	if p2p, err := cudadrv.P2PMatrix(); err == nil && len(p2p) > 1 {
		access, atomics := true, true
		for a := range p2p {
			for c := range p2p[a] {
				if a != c {
					access = access && p2p[a][c].Access
					atomics = atomics && p2p[a][c].NativeAtomics
				}
			}
		}
		switch {
		case access && atomics:
			m.Link = "nvlink"
		case access:
			m.Link = "pcie"
		}
	} else if m.Count <= 1 {
		m.Link = ""
	}
	return m
}

// Name is "cuda".
func (b *Backend) Name() string { return "cuda" }

// Device describes the rank's device.
func (b *Backend) Device() cudadrv.DeviceInfo { return b.info }

// Context is the rank's retained primary context.
func (b *Backend) Context() *cudadrv.Context { return b.ctx }

// Stream is the backend's default stream (used for requests with Stream 0).
func (b *Backend) Stream() *cudadrv.Stream { return b.stream }

// Provider supplies VMM segments to the pool.
func (b *Backend) Provider() pool.Provider { return b.prov }

// NCCLStatus says which NCCL library is in use, or why none is.
func (b *Backend) NCCLStatus() string { return b.nccl.status() }

// NewGroup creates the backend side of a group (collective over cfg.Ranks).
func (b *Backend) NewGroup(ctx context.Context, cfg backend.GroupConfig) (backend.Group, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("cuda backend: NewGroup %q: backend is closed", cfg.Name)
	}
	b.making.Add(1) // Close waits: nothing is released under the group's setup
	b.mu.Unlock()
	defer b.making.Done()
	g, err := newGroup(ctx, b, cfg, cfg.Gen)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	if b.closed { // Close began meanwhile, and closes only the groups it lists
		b.mu.Unlock()
		return nil, errors.Join(fmt.Errorf("cuda backend: NewGroup %q: backend closed while the group was made", cfg.Name), g.Close())
	}
	b.groups = append(b.groups, g)
	b.mu.Unlock()
	return g, nil
}

func (b *Backend) forget(g *Group) {
	b.mu.Lock()
	for i, x := range b.groups {
		if x == g {
			b.groups = append(b.groups[:i], b.groups[i+1:]...)
			break
		}
	}
	b.rearm() // the group may have been the aborted one
	b.mu.Unlock()
}

// Close closes every group in creation order (collective: NCCL finalizes
// each communicator with its peers), frees every segment and releases the
// context. Every error is reported, the teardown goes on past each. A
// NewGroup in progress ends first (its group closed and refused).
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.making.Wait() // groups being made (bounded by their timeouts): NewGroup closes them
	b.mu.Lock()
	gs := append([]*Group(nil), b.groups...)
	b.mu.Unlock()
	var errs []error
	for _, g := range gs {
		if err := g.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if b.presences != nil { // after the groups: their teardown may still wait on peers
		if err := b.presences.Close(); err != nil {
			errs = append(errs, fmt.Errorf("leaving the job's presence: %w", err))
		}
	}
	b.mu.Lock()
	inFlight := b.inFlight // also a group closed earlier (World.Close closes them first)
	b.mu.Unlock()
	if inFlight {
		// A group's collectives did not finish, and it leaked its mappings
		// so that they cannot fault on them. They may also use the pool's
		// segments, AllocLocal's memory, the kernels and this stream, which
		// live in the context: unmapping, unloading or releasing any of
		// them, or the context, which takes them all, under running work
		// faults it. So they stay, until the process exits.
		errs = append(errs, fmt.Errorf("segments, local allocations, kernels, stream and context kept: %w", errWorkInFlight))
		return fmt.Errorf("cuda backend: close: %w", errors.Join(errs...))
	}
	b.mu.Lock()
	for p, s := range b.local {
		if err := s.release(b.ctx); err != nil {
			errs = append(errs, fmt.Errorf("local allocation %#x: %w", p, err))
		}
		delete(b.local, p)
	}
	b.mu.Unlock()
	errs = append(errs, b.prov.close(), b.kern.unload(), b.stream.Destroy(), b.ctx.Release())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cuda backend: close: %w", err)
	}
	return nil
}

// Synchronize waits (bounded by timeout) until the backend's own stream,
// which runs calls made without WithStream, is idle, or until an open
// group that spans hosts is aborted (a member exited): NCCL's teardown of
// an aborted communicator holds its calls on the stream until it
// completes (tens of seconds with NCCL's socket transport), and the error
// is known at the abort.
func (b *Backend) Synchronize(ctx context.Context, timeout time.Duration) error {
	end := time.Now().Add(timeout)
	for {
		b.mu.Lock()
		aborted := b.aborted
		b.mu.Unlock()
		werr, cut := waitStream(ctx, b.stream, aborted, timeout)
		b.mu.Lock()
		groups := append([]*Group(nil), b.groups...)
		b.mu.Unlock()
		for _, g := range groups { // a member gone, then a mismatch: they also explain a launch failure (handshake.go)
			if err := g.watch.err(); err != nil {
				return err
			}
			if err := g.Fault(); err != nil {
				return err
			}
			if werr != nil && !cut { // a wait the abort cut short is no stall
				if err := g.stoppedErr(); err != nil {
					return err
				}
			}
		}
		if !cut {
			return werr
		}
		// The aborted group was closed meanwhile, or is not the backend's
		// (one being made): wait on for the rest.
		b.mu.Lock()
		b.rearm()
		b.mu.Unlock()
		timeout = max(time.Until(end), 0)
	}
}

// waitStream waits for stream s, the backend's (Synchronize), or until
// aborted (nil: never) ends; cut reports that an abort ended the wait (the
// caller's ctx did not).
func waitStream(ctx context.Context, s *cudadrv.Stream, aborted context.Context, timeout time.Duration) (err error, cut bool) {
	if aborted == nil {
		return s.Wait(ctx, timeout), false
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(aborted, stop)()
	err = s.Wait(wctx, timeout)
	return err, err != nil && aborted.Err() != nil && ctx.Err() == nil && errors.Is(err, context.Canceled)
}

// Usable reports why this process cannot run the GPU backend (nil when it
// can): the driver loads and device 0 has VMM with POSIX-fd handles. It
// opens no context.
func Usable() error {
	n, err := cudadrv.DeviceCount()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("no CUDA device visible: %w", errs.NotSupported)
	}
	info, err := cudadrv.Info(0)
	if err != nil {
		return err
	}
	if !info.VMM || !info.PosixFD {
		return fmt.Errorf("device 0 (%s) lacks VMM (%v) or POSIX-fd handles (%v): %w", info.Name, info.VMM, info.PosixFD, errs.NotSupported)
	}
	return nil
}
