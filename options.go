package symmem

import (
	"fmt"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend/cuda"
	"github.com/symmem/symmem/internal/wait"
	"github.com/symmem/symmem/pool"
	"github.com/symmem/symmem/rendezvous"
)

// Options configures Init. The zero value is ready to use.
type Options struct {
	// Backend is "auto" (or ""), "cpu" or "cuda". auto takes the GPU when
	// this rank can use one (libcuda loads, a device with VMM is visible)
	// and the CPU backend otherwise; cuda without a usable GPU is an error
	// wrapping ErrNotSupported.
	Backend string
	// Timeout bounds every wait (store, fd exchange, peer signals);
	// default 60 s.
	Timeout time.Duration
	// Pool configures the process's one pool (its Timeout defaults to
	// Timeout).
	Pool pool.Options
	// Checked makes every collective compare its call record (collective,
	// dtype, op, root, count, in-place, staged, the buffers' pool offsets)
	// across the ranks before it runs and fail with ErrMismatch naming the
	// first rank that differs and the argument: in-band where every member
	// shares a host (about a microsecond), else through the store (a round
	// trip per call). (The CPU backend always compares each call's record in-band at
	// no such cost; the GPU backend compares it in its kernels and, for
	// ranks on one host, at the call gate; there Checked also runs a
	// handshake kernel beside copy-engine and NCCL calls, which compares
	// CUDA graph replays too.)
	Checked bool
	// StagingBytes is the size of each group's symmetric staging buffer,
	// through which ordinary memory is staged (larger calls run in rounds).
	// 0 means DefaultStagingBytes; negative disables staging (ordinary
	// memory is then an error).
	StagingBytes int64
	// GPU holds the options only the GPU backend reads (the CPU backend
	// ignores them).
	GPU GPUOptions
	// Env overrides the environment (tests and tools); nil reads it with
	// rendezvous.EnvFromOS.
	Env *rendezvous.Env
}

// GPUOptions are the options of the GPU backend (Options.GPU).
type GPUOptions struct {
	// Watchdog is how long one of symmem's GPU kernels waits for a peer
	// before it traps, failing this rank's CUDA context instead of spinning
	// forever on a rank that died. 0 means 10 minutes. It is separate from
	// Options.Timeout because a healthy peer may reach a collective minutes
	// late.
	Watchdog time.Duration
	// ShareDevice lets several ranks use one GPU (a workstation with one
	// card; tests on a single-GPU machine). symmem's kernels and copy
	// engines run; NCCL, which needs a GPU per rank, is reported unavailable
	// for groups whose ranks share a GPU, so `auto` never picks it and
	// ordinary (non-pool) device memory is an error there — allocate from
	// the pool. Kernels of different processes time-slice the GPU unless
	// NVIDIA MPS runs (docs/gpu.md). The environment variable
	// SYMMEM_SHARE_DEVICE=1 (set by `symmem launch --share-device`) turns it
	// on too. Without it a group whose ranks share a GPU is refused.
	ShareDevice bool
	// LowContentionCTAs is how many CTAs the GPU's lc path (copy engines
	// move the data, a reduction kernel sums beside them) may take from the
	// SMs: 0 means 8, at most 64. Fewer leave more SMs to the GEMMs that
	// run beside a collective; too few and the sums fall behind the copies.
	LowContentionCTAs int
	// NCCLMulticast lets NCCL use NVLink multicast (NVLS) on the GPU
	// backend. Off by default: symmem sets NCCL_NVLS_ENABLE=0 when that
	// variable is unset (one you set is kept); `symmem doctor` says which.
	NCCLMulticast bool
	// AutoTable is the file of a table `auto` reads before its built-in
	// one (written by `symmem tune` on this machine). Where it has no row
	// for a call the built-in table answers. Empty: the environment
	// variable SYMMEM_AUTO_TABLE, for jobs started by torchrun whose
	// program does not set options; unset too, the built-in table alone.
	// Init fails with ErrInvalid when the file does not parse or validate,
	// or was measured on another GPU model or NCCL release series (a
	// table from other hardware would steer auto wrong silently: re-run
	// `symmem tune`). `symmem doctor` says which table is in force.
	AutoTable string
}

// Defaults.
const (
	// DefaultTimeout is Options.Timeout's default: 60 s.
	DefaultTimeout      = wait.DefaultTimeout
	DefaultStagingBytes = 8 << 20
	// Align is the alignment of every buffer Alloc returns.
	Align = 256
)

// CallOption modifies one collective call (WithAlgo, WithStream; the zero
// value changes nothing). Options are plain values: making and applying
// them allocates nothing, so a call with a stream costs what one without
// does (a function option escapes the options it fills: 24 B a call).
type CallOption struct {
	set    uint8 // the fields this option sets (optAlgo, optStream)
	algo   coll.Algo
	stream uint64
}

const (
	optAlgo = 1 << iota
	optStream
)

type callOpts struct {
	algo   coll.Algo
	stream uint64
}

// WithAlgo forces an algorithm (coll.AlgoAuto picks). An algorithm the
// backend does not have is an error wrapping ErrNotSupported.
func WithAlgo(a coll.Algo) CallOption { return CallOption{set: optAlgo, algo: a} }

// WithStream runs the call on a CUDA stream (ignored by the CPU backend,
// which completes every call before returning). A group's calls run in the
// order they were made even on different streams: a call waits for the
// group's previous call where that ran on another stream.
func WithStream(s uint64) CallOption { return CallOption{set: optStream, stream: s} }

// collect applies opts in order (a later option wins).
func collect(opts []CallOption) callOpts {
	o := callOpts{algo: coll.AlgoAuto}
	for _, x := range opts {
		if x.set&optAlgo != 0 {
			o.algo = x.algo
		}
		if x.set&optStream != 0 {
			o.stream = x.stream
		}
	}
	return o
}

// Validate checks the options' ranges, as Init does first: a tool can
// refuse a bad value before it starts any rank.
func (o Options) Validate() error {
	if o.Timeout < 0 || o.StagingBytes > 1<<40 {
		return fmt.Errorf("Timeout %v / StagingBytes %d out of range: %w", o.Timeout, o.StagingBytes, ErrInvalid)
	}
	if o.GPU.LowContentionCTAs < 0 || o.GPU.LowContentionCTAs > cuda.MaxLowContentionCTAs {
		return fmt.Errorf("Options.GPU.LowContentionCTAs %d: want 0 (the default, %d) to %d: %w",
			o.GPU.LowContentionCTAs, cuda.DefaultLowContentionCTAs, cuda.MaxLowContentionCTAs, ErrInvalid)
	}
	return nil
}
