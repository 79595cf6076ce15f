package nccl

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/internal/native/libnccl"
	"github.com/symmem/symmem/rendezvous"
)

const segBytes = 512 << 20 // per segment; two segments (window, plain) per rank

// child is one rank of the GPU test.
type child struct {
	rank, size     int
	passed, failed int

	lib    *libnccl.Lib
	cctx   *cudadrv.Context
	st     *rendezvous.Client
	stream *cudadrv.Stream
	seed   uint64
}

func (c *child) logf(format string, a ...any) {
	fmt.Printf(format+"\n", a...)
}

func (c *child) check(name string, err error) {
	if err != nil {
		c.failed++
		c.logf("CHECK %-58s FAIL %v", name, err)
		return
	}
	c.passed++
	c.logf("CHECK %-58s ok", name)
}

// vmm allocates size bytes of VMM device memory (as pool segments are).
func (c *child) vmm(size int64) (uint64, func(), error) {
	gran, err := cudadrv.Granularity(c.cctx.Dev)
	if err != nil {
		return 0, nil, err
	}
	a, err := cudadrv.Create(c.cctx, size)
	if err != nil {
		return 0, nil, err
	}
	ptr, err := a.Map(c.cctx, gran, []int{c.cctx.Dev})
	if err != nil {
		a.Release()
		return 0, nil, err
	}
	return ptr, func() { cudadrv.Unmap(c.cctx, ptr, size); a.Release() }, nil
}

func (c *child) run() error {
	ctx := context.Background()
	lib, err := libnccl.Load()
	if err != nil {
		return err
	}
	c.lib = lib
	c.logf("INFO nccl %s path=%s windows=%v cuda=%v NCCL_NVLS_ENABLE=%q",
		lib.VersionString(), lib.Path, lib.HasWindows, lib.HasCUDA, os.Getenv("NCCL_NVLS_ENABLE"))
	if c.cctx, err = cudadrv.Retain(c.rank); err != nil {
		return err
	}
	defer c.cctx.Release()
	if c.st, err = rendezvous.Dial(ctx, os.Getenv(storeEnv), os.Getenv(tokenEnv)); err != nil {
		return err
	}
	defer c.st.Close()
	if c.stream, err = cudadrv.NewStream(c.cctx, 0); err != nil {
		return err
	}
	defer c.stream.Destroy()
	if err := c.shareSeed(ctx); err != nil {
		return err
	}

	t0 := time.Now()
	comm, err := New(ctx, Options{GroupName: "gputest", Rank: c.rank, Size: c.size, Context: c.cctx.Handle(),
		Store: c.st, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	c.logf("INFO communicator (blocking, default CTA policy) ready in %v", time.Since(t0).Round(time.Millisecond))
	segW, freeW, err := c.vmm(segBytes)
	if err != nil {
		return err
	}
	defer freeW()
	segP, freeP, err := c.vmm(segBytes)
	if err != nil {
		return err
	}
	defer freeP()

	t0 = time.Now()
	c.check("register window (512 MiB VMM segment)", comm.Register(ctx, segW, segBytes))
	ws := comm.Windows()
	c.logf("INFO register took %v; windows %+v", time.Since(t0).Round(time.Microsecond), ws)
	c.check("window is symmetric", boolErr(len(ws) == 1 && ws[0].Symmetric, "no symmetric window"))
	c.check("Windowed inside / outside", boolErr(comm.Windowed(segW+4096, 4096) && !comm.Windowed(segP, 4096) &&
		!comm.Windowed(segW+segBytes-4096, 8192), "wrong"))
	c.check("register overlap refused", wantErr(comm.Register(ctx, segW+1<<20, 1<<20), "overlaps"))
	c.check("register misaligned refused", wantErr(comm.Register(ctx, segP+64, 1<<20), "multiples"))
	c.check("deregister unknown refused", wantErr(comm.Deregister(ctx, segP), "no window"))

	for i, tc := range cases() {
		for _, mode := range []struct {
			name string
			base uint64
			algo coll.Algo
		}{{"plain", segP, coll.AlgoNCCL}, {"window", segW, coll.AlgoNCCLWindow}} {
			name := fmt.Sprintf("%s %s %v", mode.name, tc.name(), tc.count)
			c.check(name, c.verify(ctx, comm, i*2+boolInt(mode.algo == coll.AlgoNCCLWindow), tc, mode.base, mode.algo))
		}
	}
	c.check("nccl-window on plain memory refused", wantErr(func() error {
		_, err := comm.Run(ctx, backend.Request{Kind: coll.AllReduce, DType: coll.Float32, Op: coll.Sum, Count: 16,
			In: coll.Span{Ptr: segP, Len: 64}, Out: coll.Span{Ptr: segP + 4096, Len: 64}, Algo: coll.AlgoNCCLWindow,
			Stream: c.stream.Handle()})
		return err
	}(), "not inside a registered window"))

	c.bench(ctx, comm, segP, segW)

	c.check("deregister window", comm.Deregister(ctx, segW))
	c.check("no windows left", boolErr(len(comm.Windows()) == 0 && !comm.Windowed(segW, 4096), "window still listed"))
	c.check("plain all-gather on the former window", c.verify(ctx, comm, 900, tcase{kind: coll.AllGather, dt: coll.BFloat16, count: 4097}, segW, coll.AlgoNCCL))
	c.check("close", comm.Close(ctx))
	c.check("closed comm refuses calls", wantErr(comm.AllReduce(segP, segP, 1, coll.Float32, coll.Sum, 0), "closed"))

	c.otherConfigs(ctx, segP, segW)
	c.deadInsideNCCL(ctx, segW) // last: it leaves a thread blocked inside NCCL on rank 0
	return nil
}

// deadInsideNCCL: a peer that is gone inside a blocking communicator's init
// or window registration makes them fail with libnccl.ErrTimeout at the timeout
// (issue 11), instead of hanging. Rank 1 plays the dead peer: for the
// registration it aborts its communicator instead of registering; for the
// init it publishes its hello and then never calls NCCL.
func (c *child) deadInsideNCCL(ctx context.Context, segW uint64) {
	const timeout = 5 * time.Second
	// Start together: the phases before end at different times on the two
	// ranks (rank 0 waits out a timeout there), and run 29 on 2x H200 saw
	// rank 1 give up on this communicator's id exchange before rank 0 came.
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	c.check("dead in registration: ranks meet first", c.st.Barrier(bctx, "gputest/regdead-start", c.size))
	cancel()
	comm, err := New(ctx, Options{GroupName: "gputest-regdead", Rank: c.rank, Size: c.size, Context: c.cctx.Handle(), Store: c.st, Timeout: timeout})
	c.check("dead in registration: new blocking comm", err)
	if err != nil {
		return
	}
	if c.rank == 1 {
		c.check("dead in registration: rank 1 aborts", comm.Abort())
	} else {
		c.registerDead(ctx, comm, segW, timeout)
	}
	if c.rank == 1 {
		_, err := exchangeID(ctx, c.st, keyPrefix("gputest-initdead", 0), c.rank, c.size, c.lib.Version, c.lib.GetUniqueID)
		c.check("dead in init: rank 1 publishes its hello, then stays away", err)
	} else {
		t0 := time.Now()
		_, err := New(ctx, Options{GroupName: "gputest-initdead", Rank: c.rank, Size: c.size, Context: c.cctx.Handle(), Store: c.st, Timeout: timeout})
		took := time.Since(t0)
		c.logf("INFO dead in init: New returned after %v: %v", took.Round(time.Millisecond), err)
		c.check("dead in init: blocking init fails with libnccl.ErrTimeout near the timeout",
			boolErr(errors.Is(err, libnccl.ErrTimeout) && took < timeout+3*time.Second && strings.Contains(err.Error(), "rank 0"), "no timeout error, or too late"))
	}
}

func (c *child) registerDead(ctx context.Context, comm *Comm, segW uint64, timeout time.Duration) {
	t0 := time.Now()
	err := comm.Register(ctx, segW, segBytes)
	took := time.Since(t0)
	c.logf("INFO dead in registration: Register returned after %v: %v", took.Round(time.Millisecond), err)
	c.check("dead in registration: blocking register fails with libnccl.ErrTimeout near the timeout",
		boolErr(errors.Is(err, libnccl.ErrTimeout) && took < timeout+3*time.Second, "no timeout error, or too late"))
	c.check("dead in registration: later calls fail", boolErr(comm.Register(ctx, segW, segBytes) != nil, "a broken communicator accepted a call"))
}

func (c *child) shareSeed(ctx context.Context) error {
	if c.rank == 0 {
		var b [8]byte
		rand.Read(b[:])
		if err := c.st.Set(ctx, "gputest/seed", b[:]); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := c.st.Wait(wctx, "gputest/seed")
	if err != nil {
		return err
	}
	c.seed = binary.LittleEndian.Uint64(v[0])
	c.logf("INFO data seed %#x", c.seed)
	return nil
}

// tcase is one correctness case.
type tcase struct {
	kind  coll.Kind
	dt    coll.DType
	op    coll.ReduceOp
	count int64 // per rank for all-gather / reduce-scatter, whole buffer otherwise
	root  int
}

func (t tcase) name() string {
	switch t.kind {
	case coll.AllGather:
		return fmt.Sprintf("%v %v", t.kind, t.dt)
	case coll.Broadcast:
		return fmt.Sprintf("%v %v root %d", t.kind, t.dt, t.root)
	}
	return fmt.Sprintf("%v %v %v", t.kind, t.dt, t.op)
}

func cases() []tcase {
	return []tcase{
		{kind: coll.AllGather, dt: coll.BFloat16, count: 1},
		{kind: coll.AllGather, dt: coll.Float32, count: 1024}, // 4 KiB per rank
		{kind: coll.AllGather, dt: coll.Int8, count: 1_000_003},
		{kind: coll.AllGather, dt: coll.Float16, count: 777_777},
		{kind: coll.AllGather, dt: coll.BFloat16, count: 16 << 20}, // 32 MiB per rank
		{kind: coll.ReduceScatter, dt: coll.Float32, op: coll.Sum, count: 1024},
		{kind: coll.ReduceScatter, dt: coll.BFloat16, op: coll.Sum, count: 524_289},
		{kind: coll.ReduceScatter, dt: coll.Float16, op: coll.Max, count: 1001},
		{kind: coll.ReduceScatter, dt: coll.Float32, op: coll.Avg, count: 1 << 20},
		{kind: coll.ReduceScatter, dt: coll.BFloat16, op: coll.Sum, count: 8 << 20},
		{kind: coll.AllReduce, dt: coll.Float32, op: coll.Sum, count: 4 << 20},
		{kind: coll.AllReduce, dt: coll.BFloat16, op: coll.Sum, count: 777_777},
		{kind: coll.AllReduce, dt: coll.BFloat16, op: coll.Avg, count: 65_536},
		{kind: coll.AllReduce, dt: coll.Float16, op: coll.Sum, count: 3},
		{kind: coll.AllReduce, dt: coll.Int32, op: coll.Min, count: 1000},
		{kind: coll.AllReduce, dt: coll.Uint8, op: coll.Sum, count: 4099},
		{kind: coll.AllReduce, dt: coll.Int8, op: coll.Max, count: 5000},
		{kind: coll.AllReduce, dt: coll.Float64, op: coll.Sum, count: 1000},
		{kind: coll.Broadcast, dt: coll.Int64, count: 12_345, root: 1},
	}
}

// verify runs tc on fresh random data at base (in at base, out after it),
// through Run with algo, and compares with the expected bytes.
func (c *child) verify(ctx context.Context, comm *Comm, id int, tc tcase, base uint64, algo coll.Algo) error {
	n := c.size
	es := int64(tc.dt.Size())
	inCount, outCount := tc.count, tc.count
	switch tc.kind {
	case coll.AllGather:
		outCount = tc.count * int64(n)
	case coll.ReduceScatter:
		inCount = tc.count * int64(n)
	}
	inLen, outLen := inCount*es, outCount*es
	outOff := (inLen + 1<<20 - 1) &^ (1<<20 - 1)
	if outOff+outLen > segBytes {
		return fmt.Errorf("case needs %d bytes, segment has %d", outOff+outLen, segBytes)
	}
	vals := make([][]float64, n)
	for r := range vals {
		vals[r] = genVals(c.seed, id, r, inCount, tc.dt)
	}
	var want []byte
	switch tc.kind {
	case coll.AllGather:
		for r := range vals {
			want = append(want, encode(tc.dt, vals[r])...)
		}
	case coll.ReduceScatter:
		lo, hi := int64(c.rank)*tc.count, int64(c.rank+1)*tc.count
		want = encode(tc.dt, combine(tc.op, vals[0][lo:hi], vals[1][lo:hi]))
	case coll.AllReduce:
		want = encode(tc.dt, combine(tc.op, vals[0], vals[1]))
	case coll.Broadcast:
		want = encode(tc.dt, vals[tc.root])
	}
	in, out := base, base+uint64(outOff)
	if err := cudadrv.Memset8(c.cctx, out, 0xEE, outLen); err != nil {
		return err
	}
	src := in
	if tc.kind == coll.Broadcast {
		src = out // in place on Out
	}
	if tc.kind != coll.Broadcast || c.rank == tc.root {
		if err := cudadrv.CopyHtoD(c.cctx, src, encode(tc.dt, vals[c.rank])); err != nil {
			return err
		}
	}
	if err := c.cctx.Synchronize(); err != nil {
		return err
	}
	req := backend.Request{Kind: tc.kind, DType: tc.dt, Op: tc.op, Root: tc.root, Count: tc.count,
		In: coll.Span{Ptr: in, Len: inLen}, Out: coll.Span{Ptr: out, Len: outLen}, Algo: algo, Stream: c.stream.Handle()}
	path, err := comm.Run(ctx, req)
	if err != nil {
		return err
	}
	if path.Algo != algo {
		return fmt.Errorf("path %v, want %v", path, algo)
	}
	if err := c.stream.Wait(ctx, 30*time.Second); err != nil {
		return err
	}
	got := make([]byte, outLen)
	if err := cudadrv.CopyDtoH(c.cctx, got, out); err != nil {
		return err
	}
	if d := firstDiff(got, want, int(es)); d != "" {
		return errors.New(d)
	}
	return nil
}

func boolErr(ok bool, msg string) error {
	if ok {
		return nil
	}
	return errors.New(msg)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func wantErr(err error, substr string) error {
	if err == nil {
		return errors.New("succeeded, want an error")
	}
	if !strings.Contains(err.Error(), substr) {
		return fmt.Errorf("error %q does not mention %q", err, substr)
	}
	return nil
}
