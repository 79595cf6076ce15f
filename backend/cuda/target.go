package cuda

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/symmem/symmem/backend"
	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/native/cuda"
	"github.com/symmem/symmem/pool"
	"github.com/symmem/symmem/rendezvous"
)

// Target is one rank of a GPU job as the bench harness sees it: the backend,
// a pool and the world group, set up from the launcher's environment. It is
// what `symmem bench -backend cuda` should run on (cuda.NewTarget with
// rendezvous.EnvFromOS()) until the root package wires this backend.
type Target struct {
	env     rendezvous.Env
	store   *rendezvous.Client
	cleanup func() error
	fdx     *rendezvous.FDExchange
	B       *Backend
	Pool    *pool.Pool
	G       *Group
	gid     pool.GroupID
	timeout time.Duration

	seq      int // this process's NewTarget count: namespaces the barrier keys
	mu       sync.Mutex
	ordinary map[uint64]*segment
	barriers int
	prog     *cuda.Program
}

var (
	_ bench.Target      = (*Target)(nil)
	_ bench.Exchanger   = (*Target)(nil)
	_ bench.AlgoChecker = (*Target)(nil)
)

// TargetOptions configure NewTarget.
type TargetOptions struct {
	Backend Options
	Pool    pool.Options
	Timeout time.Duration // 0 = DefaultTimeout
}

// NewTarget joins the job described by env (collective over the world).
func NewTarget(ctx context.Context, env rendezvous.Env, o TargetOptions) (*Target, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	t := &Target{env: env, timeout: o.Timeout, ordinary: map[uint64]*segment{}, prog: cuda.NewProgram(4), seq: nextGeneration("\x00target")}
	var err error
	o.Backend.ShareDevice = o.Backend.ShareDevice || env.ShareDevice
	if t.B, err = New(env, o.Backend); err != nil {
		return nil, err
	}
	bctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if t.store, t.cleanup, err = rendezvous.Bootstrap(bctx, env); err != nil {
		t.B.Close()
		return nil, fmt.Errorf("cuda target: %w", err)
	}
	if t.fdx, err = rendezvous.NewFDExchange(env); err != nil {
		t.Close()
		return nil, fmt.Errorf("cuda target: %w", err)
	}
	if o.Pool.Timeout == 0 {
		o.Pool.Timeout = o.Timeout
	}
	if t.Pool, err = pool.New(t.B.Provider(), o.Pool); err != nil {
		t.Close()
		return nil, fmt.Errorf("cuda target: %w", err)
	}
	if t.G, t.gid, err = t.AddGroup(bctx, "world", allRanks(env.WorldSize)); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

func allRanks(n int) []int {
	r := make([]int, n)
	for i := range r {
		r[i] = i
	}
	return r
}

// AddGroup creates another group over ranks (collective over those ranks)
// sharing the target's pool.
func (t *Target) AddGroup(ctx context.Context, name string, ranks []int) (*Group, pool.GroupID, error) {
	bg, err := t.B.NewGroup(ctx, backend.GroupConfig{Name: name, Ranks: ranks, Rank: t.env.Rank, Store: t.store, FDs: t.fdx, Timeout: t.timeout})
	if err != nil {
		return nil, 0, fmt.Errorf("cuda target: group %q: %w", name, err)
	}
	g := bg.(*Group)
	gid, err := t.Pool.AddGroup(g)
	if err != nil {
		g.Close()
		return nil, 0, fmt.Errorf("cuda target: group %q: %w", name, err)
	}
	return g, gid, nil
}

// Close frees everything (local).
func (t *Target) Close() error {
	var err error
	if t.Pool != nil {
		ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
		err = t.Pool.Close(ctx)
		cancel()
	}
	t.mu.Lock()
	for p, s := range t.ordinary {
		s.release(t.B.ctx)
		delete(t.ordinary, p)
	}
	t.mu.Unlock()
	if e := t.B.Close(); err == nil {
		err = e
	}
	if t.fdx != nil {
		t.fdx.Close()
	}
	if t.cleanup != nil {
		if e := t.cleanup(); err == nil {
			err = e
		}
	}
	return err
}

func (t *Target) Rank() int    { return t.env.Rank }
func (t *Target) Size() int    { return t.env.WorldSize }
func (t *Target) Name() string { return "cuda" }

// Alloc returns device memory: a pool block registered with the world group
// (symmetric) or a private VMM allocation outside the pool.
func (t *Target) Alloc(bytes int64, symmetric bool) (coll.Span, error) {
	if bytes <= 0 {
		return coll.Span{}, fmt.Errorf("cuda target: alloc of %d bytes", bytes)
	}
	if !symmetric {
		size := (bytes + t.B.gran - 1) / t.B.gran * t.B.gran
		s, err := createLocal(t.B.ctx, size, t.B.gran)
		if err != nil {
			return coll.Span{}, err
		}
		t.mu.Lock()
		t.ordinary[s.base] = s
		t.mu.Unlock()
		return coll.Span{Ptr: s.base, Len: bytes}, nil
	}
	return t.AllocIn(t.gid, bytes)
}

// AllocIn allocates a symmetric block for group gid (collective over it).
func (t *Target) AllocIn(gid pool.GroupID, bytes int64) (coll.Span, error) {
	ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
	defer cancel()
	sc, err := t.Pool.OpenScope(gid)
	if err != nil {
		return coll.Span{}, err
	}
	blk, err := t.Pool.Alloc(bytes, 4096)
	if eerr := sc.End(ctx); err == nil {
		err = eerr
	}
	if err != nil {
		return coll.Span{}, fmt.Errorf("cuda target: symmetric alloc of %d bytes: %w", bytes, err)
	}
	return coll.Span{Ptr: blk.Addr, Len: bytes}, nil
}

// Free releases memory from Alloc (after the device finished with it).
func (t *Target) Free(s coll.Span) error {
	if err := t.Sync(); err != nil {
		return err
	}
	t.mu.Lock()
	seg, ok := t.ordinary[s.Ptr]
	delete(t.ordinary, s.Ptr)
	t.mu.Unlock()
	if ok {
		return seg.release(t.B.ctx)
	}
	return t.Pool.Free(s.Ptr, nil)
}

func (t *Target) Write(dst coll.Span, src []byte) error {
	if int64(len(src)) > dst.Len {
		return fmt.Errorf("cuda target: write of %d bytes into a %d-byte span", len(src), dst.Len)
	}
	return cuda.CopyHtoD(t.B.ctx, dst.Ptr, src)
}

func (t *Target) Read(dst []byte, src coll.Span) error {
	if int64(len(dst)) > src.Len {
		return fmt.Errorf("cuda target: read of %d bytes from a %d-byte span", len(dst), src.Len)
	}
	return cuda.CopyDtoH(t.B.ctx, dst, src.Ptr)
}

// Request builds the backend request for a call on group g (gid).
func (t *Target) Request(g *Group, gid pool.GroupID, k coll.Kind, out, in coll.Span, count int64, dt coll.DType, op coll.ReduceOp, root int, algo coll.Algo) backend.Request {
	req := backend.Request{Kind: k, DType: dt, Op: op, Root: root, Count: count, In: in, Out: out, Algo: algo}
	il, ol := ioLens(req, g.Size())
	req.In.Len, req.Out.Len = il, ol
	if k == coll.Broadcast {
		req.In = req.Out
	}
	if seg, off, ok := t.Pool.Symmetric(out.Ptr, ol, gid); ok {
		req.OutSym = backend.Sym{OK: true, Seg: seg, Off: off}
	}
	if seg, off, ok := t.Pool.Symmetric(req.In.Ptr, req.In.Len, gid); ok {
		req.InSym = backend.Sym{OK: true, Seg: seg, Off: off}
	}
	return req
}

func (t *Target) Run(k coll.Kind, out, in coll.Span, count int64, dt coll.DType, op coll.ReduceOp, root int, algo coll.Algo) (coll.Path, error) {
	req := t.Request(t.G, t.gid, k, out, in, count, dt, op, root, algo)
	return t.G.Run(context.Background(), req)
}

// Sync waits (bounded) until the backend's stream is idle.
func (t *Target) Sync() error {
	return t.B.stream.Wait(context.Background(), t.timeout)
}

func (t *Target) Barrier() error {
	t.mu.Lock()
	t.barriers++
	name := fmt.Sprintf("symmem/%s/cuda-target/%d/barrier/%d", t.env.JobID, t.seq, t.barriers)
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
	defer cancel()
	return t.store.Barrier(ctx, name, t.env.WorldSize)
}

// Memcpy copies locally on the backend's stream (copy engine).
func (t *Target) Memcpy(dst, src coll.Span) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.prog
	p.Reset()
	p.SetContext(t.B.ctx)
	p.Copy(t.B.stream.Handle(), dst.Ptr, src.Ptr, min(dst.Len, src.Len))
	return p.Exec()
}

// ExchangeFloat64 shares a few numbers through the store.
func (t *Target) ExchangeFloat64(vals []float64) ([][]float64, error) {
	b := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	all, err := t.G.AllGather(context.Background(), b)
	if err != nil {
		return nil, err
	}
	out := make([][]float64, len(all))
	for r, v := range all {
		out[r] = make([]float64, len(v)/8)
		for i := range out[r] {
			out[r][i] = math.Float64frombits(binary.LittleEndian.Uint64(v[8*i:]))
		}
	}
	return out, nil
}

// CheckAlgo rejects combinations this backend cannot run at all.
func (t *Target) CheckAlgo(k coll.Kind, a coll.Algo) error {
	switch a {
	case coll.AlgoCE:
		if k != coll.AllGather {
			return fmt.Errorf("ce serves all_gather only")
		}
		if !t.G.ce {
			return fmt.Errorf("copy engines unavailable: %s", t.G.ceWhy)
		}
	case coll.AlgoKernel:
		if k == coll.Broadcast {
			return fmt.Errorf("kernel serves all_gather, reduce_scatter and all_reduce")
		}
		if t.G.kargs == nil {
			return fmt.Errorf("the kernels are unavailable: %s", t.G.kernWhy)
		}
	case coll.AlgoNCCL, coll.AlgoNCCLWindow:
		if t.G.nccl.comm == nil {
			return fmt.Errorf("NCCL unavailable: %v", t.G.nccl.err)
		}
	case coll.AlgoAuto, "":
	default:
		return fmt.Errorf("unknown GPU algorithm %q (want auto, kernel, ce, nccl or nccl-window)", a)
	}
	return nil
}
