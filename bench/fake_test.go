package bench

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/reduce"
)

// fakeJob is an in-process stand-in for a job of n ranks, used only to test
// the harness's pure logic (layouts, data, checking, reports). Collectives
// are computed with package reduce from peers' memory between barriers.
// The real multi-process run is the CLI end-to-end test.
type fakeJob struct {
	n       int
	mu      sync.Mutex
	cond    *sync.Cond
	arrived int
	gen     int
	ranks   []*fakeRank
	corrupt int          // when > 0, rank 0 flips this many output elements per call
	memcpys atomic.Int64 // Memcpy calls, every rank
	// refuseOver: when > 0, algorithm "kernel" refuses calls of more than
	// this many bytes per rank (errs.Refused), like a forced path.
	refuseOver int64
	// noPathOver: when > 0, every algorithm fails calls of more than this
	// many bytes per rank with ErrNotSupported, as a GPU without NCCL does
	// for large reductions.
	noPathOver int64
	// slowFirst: each rank's first slowFirst calls take slowFor longer,
	// like first touches and lazy setup.
	slowFirst int
	slowFor   time.Duration
}

type fakeRank struct {
	job    *fakeJob
	rank   int
	allocs map[uint64][]byte
	next   uint64
	calls  int
	runs   []string   // "algo/bytes per rank" of every Run, in order
	bufs   []fakeBufs // where every Run's buffers sat
}

// fakeBufs is a Run's type and its input's and output's address mod 16
// (allocations are 4096-aligned).
type fakeBufs struct {
	dt      coll.DType
	in, out uint64
}

func newFakeJob(n int) *fakeJob {
	j := &fakeJob{n: n}
	j.cond = sync.NewCond(&j.mu)
	for r := 0; r < n; r++ {
		j.ranks = append(j.ranks, &fakeRank{job: j, rank: r, allocs: map[uint64][]byte{}, next: uint64(r+1) << 40})
	}
	return j
}

func (j *fakeJob) barrier() {
	j.mu.Lock()
	defer j.mu.Unlock()
	g := j.gen
	j.arrived++
	if j.arrived == j.n {
		j.arrived, j.gen = 0, j.gen+1
		j.cond.Broadcast()
		return
	}
	for g == j.gen {
		j.cond.Wait()
	}
}

func (f *fakeRank) Rank() int    { return f.rank }
func (f *fakeRank) Size() int    { return f.job.n }
func (f *fakeRank) Name() string { return "fake" }
func (f *fakeRank) Sync() error  { return nil }
func (f *fakeRank) Barrier() error {
	f.job.barrier()
	return nil
}

func (f *fakeRank) Alloc(n int64, sym bool) (coll.Span, error) {
	f.job.mu.Lock()
	defer f.job.mu.Unlock()
	p := f.next
	f.allocs[p] = make([]byte, n)
	f.next += uint64(n+4095) &^ 4095
	return coll.Span{Ptr: p, Len: n}, nil
}

func (f *fakeRank) Free(s coll.Span) error {
	f.job.mu.Lock()
	defer f.job.mu.Unlock()
	delete(f.allocs, s.Ptr)
	return nil
}

// mem returns the bytes of s in this rank's memory.
func (f *fakeRank) mem(s coll.Span) ([]byte, error) {
	f.job.mu.Lock()
	defer f.job.mu.Unlock()
	for p, b := range f.allocs {
		if s.Ptr >= p && s.End() <= p+uint64(len(b)) {
			return b[s.Ptr-p : s.End()-p], nil
		}
	}
	return nil, fmt.Errorf("span %#x+%d not allocated on rank %d", s.Ptr, s.Len, f.rank)
}

func (f *fakeRank) Write(dst coll.Span, src []byte) error {
	b, err := f.mem(coll.Span{Ptr: dst.Ptr, Len: int64(len(src))})
	if err == nil {
		copy(b, src)
	}
	return err
}

func (f *fakeRank) Read(dst []byte, src coll.Span) error {
	b, err := f.mem(coll.Span{Ptr: src.Ptr, Len: int64(len(dst))})
	if err == nil {
		copy(dst, b)
	}
	return err
}

func (f *fakeRank) Memcpy(dst, src coll.Span) error {
	f.job.memcpys.Add(1)
	n := min(dst.Len, src.Len)
	d, err := f.mem(coll.Span{Ptr: dst.Ptr, Len: n})
	if err != nil {
		return err
	}
	s, err := f.mem(coll.Span{Ptr: src.Ptr, Len: n})
	if err != nil {
		return err
	}
	copy(d, s)
	return nil
}

// Run: every rank publishes (in, out), everyone computes its own output
// from peers' inputs, then a second barrier protects the inputs.
func (f *fakeRank) Run(k coll.Kind, out, in coll.Span, count int64, dt coll.DType, op coll.ReduceOp, root int, algo coll.Algo) (coll.Path, error) {
	j, es := f.job, int64(dt.Size())
	if algo == coll.AlgoKernel && j.refuseOver > 0 && count*es > j.refuseOver {
		return coll.Path{}, fmt.Errorf("fake: %d bytes per rank is over %d: %w", count*es, j.refuseOver, errs.Refused)
	}
	if j.noPathOver > 0 && count*es > j.noPathOver {
		return coll.Path{}, fmt.Errorf("fake: no path for %d bytes per rank: %w", count*es, errs.NotSupported)
	}
	f.runs = append(f.runs, fmt.Sprintf("%s/%d", algo, count*es))
	f.bufs = append(f.bufs, fakeBufs{dt, in.Ptr % 16, out.Ptr % 16})
	if f.calls++; f.calls <= j.slowFirst {
		time.Sleep(j.slowFor)
	}
	f.job.barrier()
	ins := make([][]byte, j.n)
	for r, p := range j.ranks {
		n := count * es
		if k == coll.ReduceScatter || k == coll.AllToAll {
			n *= int64(j.n)
		}
		// Symmetric: every rank allocates the same sizes in the same order
		// from its own base address.
		ptr := in.Ptr - uint64(f.rank+1)<<40 + uint64(r+1)<<40
		if k == coll.AllGather && in.Ptr == out.Ptr+uint64(int64(f.rank)*count*es) {
			ptr = out.Ptr - uint64(f.rank+1)<<40 + uint64(r+1)<<40 + uint64(int64(r)*count*es) // in-place
		}
		b, err := p.mem(coll.Span{Ptr: ptr, Len: n})
		if err != nil {
			return coll.Path{}, err
		}
		ins[r] = append([]byte(nil), b...)
	}
	o, err := f.mem(out)
	if err != nil {
		return coll.Path{}, err
	}
	j.barrier()
	switch k {
	case coll.AllGather:
		for r := range ins {
			copy(o[int64(r)*count*es:], ins[r])
		}
	case coll.Broadcast:
		copy(o, ins[root])
	case coll.AllToAll:
		for r := range ins {
			copy(o[int64(r)*count*es:], ins[r][int64(f.rank)*count*es:][:count*es])
		}
	case coll.AllReduce, coll.ReduceScatter:
		off := int64(0)
		if k == coll.ReduceScatter {
			off = int64(f.rank) * count * es
		}
		acc := append([]byte(nil), ins[0][off:off+count*es]...)
		for r := 1; r < j.n; r++ {
			if err := reduce.ReduceN(acc, [][]byte{acc, ins[r][off : off+count*es]}, dt, op); err != nil {
				return coll.Path{}, err
			}
		}
		if err := reduce.Finish(acc, dt, op, j.n); err != nil {
			return coll.Path{}, err
		}
		copy(o, acc)
	}
	if f.rank == 0 {
		for i := 0; i < j.corrupt && int64(i)*es < out.Len; i++ {
			o[int64(i)*es] ^= 0x5a
		}
	}
	j.barrier()
	return coll.Path{Algo: coll.AlgoDirect, Reason: "fake"}, nil
}

// runFake runs cfg on every rank of a fake job and returns rank 0's report.
func runFake(n int, cfg Config, corrupt int) (*Report, error) {
	return runFakeJob(newFakeJob(n), cfg, corrupt)
}

func runFakeJob(j *fakeJob, cfg Config, corrupt int) (*Report, error) {
	n := j.n
	j.corrupt = corrupt
	reps := make([]*Report, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			reps[r], errs[r] = Run(j.ranks[r], cfg)
		}(r)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return reps[0], nil
}
