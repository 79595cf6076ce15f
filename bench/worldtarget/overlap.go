//go:build cgo

package worldtarget

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/native/cublas"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

var _ bench.Overlapper = (*Overlap)(nil)

// Overlap implements bench.Overlapper on the cuda backend: bf16 GEMMs
// through cuBLAS (internal/native/cublas) on a compute stream of its own,
// collectives through the user API (symmem.WithStream) on a communication
// stream of its own, both timed with CUDA events.
//
// Every trial starts with a small all-gather on the communication stream:
// it completes on every rank at about the same moment (the ranks' hosts
// reach a trial up to a store round trip apart), and the start event is
// recorded right after it, so one rank's head start is not timed as
// communication. The compute stream waits for that event: both streams
// start together. After each iteration the streams join (the compute
// stream waits for the collectives' end event, the communication stream
// for the join), so an iteration starts when the previous one has fully
// ended.
type Overlap struct {
	*Target
	timeout time.Duration
	lib     *cublas.Lib
	ctx     *cudadrv.Context
	h       *cublas.Handle
	gs, cs  *cudadrv.Stream // compute (GEMM) and communication streams
	// start, gemmEnd, commEnd and end time a trial; join orders iterations.
	start, gemmEnd, commEnd, end, join *cudadrv.Event
	prog                               *cudadrv.Program
	shape                              bench.GEMMShape
	a, b, c                            symmem.Buffer // GEMM operands (AllocLocal)
	syncIn, syncOut                    coll.Span     // the start-aligning all-gather
}

// NewOverlap loads cuBLAS and creates the streams and events (local). It
// needs the cuda backend; the error says what was looked for when cuBLAS is
// missing. timeout bounds the wait for one trial.
func NewOverlap(t *Target, timeout time.Duration) (*Overlap, error) {
	if be := t.w.Backend(); be != "cuda" {
		return nil, fmt.Errorf("the overlap benchmark runs GEMMs on a GPU: it needs the cuda backend, this job runs %s (--backend cuda): %w", be, symmem.ErrNotSupported)
	}
	lib, err := cublas.Load()
	if err != nil {
		return nil, fmt.Errorf("the overlap benchmark needs cuBLAS for its GEMMs: %w", err)
	}
	o := &Overlap{Target: t, timeout: timeout, lib: lib, prog: cudadrv.NewProgram(16)}
	if o.ctx, err = cudadrv.Retain(t.w.Device()); err != nil { // the backend's GPU
		return nil, err
	}
	if err := o.init(); err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

func (o *Overlap) init() error {
	var err error
	if o.gs, err = cudadrv.NewStream(o.ctx, 0); err != nil {
		return err
	}
	if o.cs, err = cudadrv.NewStream(o.ctx, 0); err != nil {
		return err
	}
	for _, e := range []**cudadrv.Event{&o.start, &o.gemmEnd, &o.commEnd, &o.end} {
		if *e, err = cudadrv.NewEvent(o.ctx, true); err != nil {
			return err
		}
	}
	if o.join, err = cudadrv.NewEvent(o.ctx, false); err != nil {
		return err
	}
	if o.h, err = o.lib.New(o.ctx.Handle()); err != nil {
		return fmt.Errorf("creating a cuBLAS handle (%s): %w", o.lib, err)
	}
	if err := o.h.SetStream(o.gs.Handle()); err != nil {
		return err
	}
	// 16 bytes per rank: every path takes it (16-byte multiples).
	if o.syncIn, err = o.Alloc(16, true); err != nil {
		return err
	}
	if o.syncOut, err = o.Alloc(16*int64(o.Size()), true); err != nil {
		return err
	}
	return o.Write(o.syncIn, make([]byte, 16))
}

// CUBLAS describes the loaded cuBLAS library (path and version).
func (o *Overlap) CUBLAS() string { return o.lib.String() }

// Device names the GPU the streams run on.
func (o *Overlap) Device() string {
	info, err := cudadrv.Info(o.ctx.Dev)
	if err != nil {
		return fmt.Sprintf("device %d", o.ctx.Dev)
	}
	return fmt.Sprintf("GPU %d %s (%d SMs), driver API %d", o.ctx.Dev, info.Name, info.SMs, cudadrv.DriverVersion())
}

// Algos lists the algorithms the world accepts for k besides auto.
func (o *Overlap) Algos(k coll.Kind) []coll.Algo { return o.w.Algos(k) }

// SetupGEMM allocates A (M×K), B (K×N) and C (M×N), bf16 (column-major,
// packed), fills A and B with random multiples of 1/128 in [-1, 1), and
// checks one GEMM against the host at a few positions, so the timed GEMMs
// are known to compute.
func (o *Overlap) SetupGEMM(s bench.GEMMShape) error {
	if o.a.Len != 0 {
		return fmt.Errorf("SetupGEMM called twice")
	}
	o.shape = s
	var err error
	var host [2][]byte
	for i, p := range []struct {
		buf   *symmem.Buffer
		elems int64
	}{{&o.a, int64(s.M) * int64(s.K)}, {&o.b, int64(s.K) * int64(s.N)}, {&o.c, int64(s.M) * int64(s.N)}} {
		if *p.buf, err = o.w.AllocLocal(2 * p.elems); err != nil {
			return fmt.Errorf("allocating a %d-byte GEMM operand: %w", 2*p.elems, err)
		}
		if i < 2 {
			if host[i], err = o.fillBF16(p.buf.Span, uint64(i+1)+uint64(o.Rank())<<8); err != nil {
				return err
			}
		}
	}
	return o.checkGEMM(host[0], host[1])
}

// fillBF16 writes random bf16 values to s in chunks and returns them.
func (o *Overlap) fillBF16(s coll.Span, seed uint64) ([]byte, error) {
	const chunk = 8 << 20
	all := make([]byte, s.Len)
	x := seed*0x9e3779b97f4a7c15 + 1
	for i := 0; i+1 < len(all); i += 2 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v := float32(int(x>>56)-128) / 128 // exact in bf16
		binary.LittleEndian.PutUint16(all[i:], bf16(v))
	}
	for off := int64(0); off < s.Len; off += chunk {
		n := min(chunk, s.Len-off)
		if err := o.w.Write(o.Target.ctx, coll.Span{Ptr: s.Ptr + uint64(off), Len: n}, all[off:off+n]); err != nil {
			return nil, fmt.Errorf("writing GEMM operands: %w", err)
		}
	}
	return all, nil
}

// checkGEMM runs one GEMM and compares a few elements of C (bf16) with a
// float64 reference from the host copies of A and B.
func (o *Overlap) checkGEMM(a, b []byte) error {
	s := o.shape
	if err := o.gemm(); err != nil {
		return err
	}
	if err := o.gs.Wait(o.Target.ctx, o.timeout); err != nil {
		return err
	}
	at := func(m []byte, i int) float64 {
		return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(m[2*i:])) << 16))
	}
	for _, ij := range [][2]int{{0, 0}, {s.M - 1, s.N - 1}, {s.M / 2, s.N / 3}, {s.M / 3, s.N - 1}, {s.M - 1, 0}} {
		i, j := ij[0], ij[1]
		var ref, mag float64
		for p := 0; p < s.K; p++ {
			x := at(a, i+p*s.M) * at(b, p+j*s.K)
			ref += x
			mag += math.Abs(x)
		}
		var got [2]byte
		if err := o.w.Read(o.Target.ctx, got[:], coll.Span{Ptr: o.c.Ptr + 2*uint64(i+j*s.M), Len: 2}); err != nil {
			return err
		}
		g := at(got[:], 0)
		if tol := math.Abs(ref)/128 + 1e-4*mag + 1e-3; !(math.Abs(g-ref) <= tol) {
			return fmt.Errorf("the benchmark's GEMM (%s) computed C[%d,%d] = %g, the host %g (tolerance %g): its timings would mean nothing", o.lib, i, j, g, ref, tol)
		}
	}
	return nil
}

// bf16 truncates f (exact for the values written here).
func bf16(f float32) uint16 { return uint16(math.Float32bits(f) >> 16) }

// gemm enqueues one GEMM on the compute stream.
func (o *Overlap) gemm() error {
	s := o.shape
	return o.h.Gemm(cublas.Gemm{M: s.M, N: s.N, K: s.K, A: o.a.Ptr, B: o.b.Ptr, C: o.c.Ptr,
		AType: cublas.R16BF, BType: cublas.R16BF, CType: cublas.R16BF, Alpha: 1})
}

// collective enqueues c on the communication stream.
func (o *Overlap) collective(c bench.Call) (coll.Path, error) {
	opts := []symmem.CallOption{symmem.WithAlgo(c.Algo), symmem.WithStream(o.cs.Handle())}
	switch c.K {
	case coll.AllGather:
		return o.g.AllGather(o.Target.ctx, c.Out, c.In, c.DType, opts...)
	case coll.ReduceScatter:
		return o.g.ReduceScatter(o.Target.ctx, c.Out, c.In, c.DType, c.Op, opts...)
	case coll.AllReduce:
		return o.g.AllReduce(o.Target.ctx, c.Out, c.In, c.DType, c.Op, opts...)
	}
	return coll.Path{}, fmt.Errorf("overlap: unsupported op %v", c.K)
}

// ops issues a few event operations in one call.
func (o *Overlap) ops(f func(p *cudadrv.Program)) error {
	o.prog.Reset()
	o.prog.SetContext(o.ctx)
	f(o.prog)
	return o.prog.Exec()
}

// Trial runs tr and returns its device times (see bench.Trial).
func (o *Overlap) Trial(tr bench.Trial) (bench.TrialTimes, error) {
	var tt bench.TrialTimes
	if o.a.Len == 0 && tr.Mode != bench.CommOnly {
		return tt, fmt.Errorf("overlap: Trial before SetupGEMM")
	}
	gs, cs := o.gs.Handle(), o.cs.Handle()
	// Align the ranks on the device, then start both streams together.
	if _, err := o.g.AllGather(o.Target.ctx, o.syncOut, o.syncIn, coll.Float32, symmem.WithStream(cs)); err != nil {
		return tt, fmt.Errorf("overlap: the start-aligning all-gather: %w", err)
	}
	err := o.ops(func(p *cudadrv.Program) {
		p.Record(cs, o.start.Handle())
		p.WaitEvent(gs, o.start.Handle())
	})
	gemms, calls := tr.GEMMs, tr.Calls
	switch tr.Mode {
	case bench.GEMMOnly:
		calls = 0
	case bench.CommOnly:
		gemms = 0
	}
	for i := 0; i < tr.Iters && err == nil; i++ {
		if i > 0 {
			err = o.ops(func(p *cudadrv.Program) {
				if calls > 0 {
					p.WaitEvent(gs, o.commEnd.Handle())
				}
				p.Record(gs, o.join.Handle())
				p.WaitEvent(cs, o.join.Handle())
			})
		}
		for j := 0; j < gemms && err == nil; j++ {
			err = o.gemm()
		}
		if gemms > 0 && err == nil {
			err = o.ops(func(p *cudadrv.Program) {
				p.Record(gs, o.gemmEnd.Handle())
				if tr.Mode == bench.Sequential {
					p.WaitEvent(cs, o.gemmEnd.Handle())
				}
			})
		}
		for j := 0; j < calls && err == nil; j++ {
			tt.Path, err = o.collective(tr.Call)
		}
		if calls > 0 && err == nil {
			err = o.ops(func(p *cudadrv.Program) { p.Record(cs, o.commEnd.Handle()) })
		}
	}
	// Whatever happened, join the streams and wait, so no work of this
	// trial runs into the next.
	jerr := o.ops(func(p *cudadrv.Program) {
		if calls > 0 {
			p.WaitEvent(gs, o.commEnd.Handle())
		}
		p.Record(gs, o.end.Handle())
	})
	werr := o.end.Wait(o.Target.ctx, o.timeout)
	if werr == nil {
		werr = o.cs.Wait(o.Target.ctx, o.timeout)
	}
	if err = errors.Join(err, jerr, werr); err != nil {
		return tt, err
	}
	if tt.Total, err = cudadrv.Elapsed(o.start, o.end); err != nil {
		return tt, err
	}
	if gemms > 0 {
		if tt.GEMM, err = cudadrv.Elapsed(o.start, o.gemmEnd); err != nil {
			return tt, err
		}
	}
	if calls > 0 {
		if tt.Comm, err = cudadrv.Elapsed(o.start, o.commEnd); err != nil {
			return tt, err
		}
	}
	return tt, nil
}

// Close waits for the streams, then frees what NewOverlap and SetupGEMM
// made. It does not close the Target.
func (o *Overlap) Close() error {
	var errs []error
	for _, s := range []*cudadrv.Stream{o.gs, o.cs} {
		if s != nil {
			errs = append(errs, s.Wait(o.Target.ctx, o.timeout))
		}
	}
	for _, b := range []*symmem.Buffer{&o.a, &o.b, &o.c} {
		if b.Len != 0 {
			errs = append(errs, o.w.Free(*b))
			*b = symmem.Buffer{}
		}
	}
	for _, s := range []*coll.Span{&o.syncIn, &o.syncOut} {
		if s.Len != 0 {
			errs = append(errs, o.Free(*s))
			*s = coll.Span{}
		}
	}
	if o.h != nil {
		errs = append(errs, o.h.Close())
	}
	for _, e := range []*cudadrv.Event{o.start, o.gemmEnd, o.commEnd, o.end, o.join} {
		if e != nil {
			errs = append(errs, e.Destroy())
		}
	}
	for _, s := range []*cudadrv.Stream{o.gs, o.cs} {
		if s != nil {
			errs = append(errs, s.Destroy())
		}
	}
	o.gs, o.cs, o.h = nil, nil, nil
	o.start, o.gemmEnd, o.commEnd, o.end, o.join = nil, nil, nil, nil, nil
	if o.ctx != nil {
		errs = append(errs, o.ctx.Release())
		o.ctx = nil
	}
	return errors.Join(errs...)
}
