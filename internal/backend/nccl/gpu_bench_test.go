package nccl

import (
	"context"
	"fmt"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// benchOne times iters back-to-back calls of op on bf16 data whose full
// (gathered / pre-reduction) tensor has total bytes, at base; nccl-tests
// conventions for algbw and busbw. It returns the time per call in us.
func (c *child) benchOne(ctx context.Context, comm *Comm, op coll.Kind, total int64, base uint64, iters int) (float64, error) {
	n := int64(c.size)
	const es = 2
	var in, out int64
	var call func() error
	switch op {
	case coll.AllGather:
		in, out = total/n, total
	case coll.ReduceScatter:
		in, out = total, total/n
	case coll.AllReduce:
		in, out = total, total
	}
	inPtr := base
	outPtr := base + uint64((in+1<<20-1)&^(1<<20-1))
	if outPtr+uint64(out) > base+segBytes {
		return 0, fmt.Errorf("bench of %d bytes does not fit", total)
	}
	s := c.stream.Handle()
	switch op {
	case coll.AllGather:
		call = func() error { return comm.AllGather(inPtr, outPtr, total/n/es, coll.BFloat16, s) }
	case coll.ReduceScatter:
		call = func() error { return comm.ReduceScatter(inPtr, outPtr, total/n/es, coll.BFloat16, coll.Sum, s) }
	case coll.AllReduce:
		call = func() error { return comm.AllReduce(inPtr, outPtr, total/es, coll.BFloat16, coll.Sum, s) }
	}
	ev0, err := cudadrv.NewEvent(c.cctx, true)
	if err != nil {
		return 0, err
	}
	defer ev0.Destroy()
	ev1, err := cudadrv.NewEvent(c.cctx, true)
	if err != nil {
		return 0, err
	}
	defer ev1.Destroy()
	for i := 0; i < 5; i++ {
		if err := call(); err != nil {
			return 0, err
		}
	}
	if err := ev0.Record(c.stream); err != nil {
		return 0, err
	}
	for i := 0; i < iters; i++ {
		if err := call(); err != nil {
			return 0, err
		}
	}
	if err := ev1.Record(c.stream); err != nil {
		return 0, err
	}
	if err := ev1.Wait(ctx, 60*time.Second); err != nil {
		return 0, err
	}
	ms, err := cudadrv.Elapsed(ev0, ev1)
	if err != nil {
		return 0, err
	}
	return ms * 1000 / float64(iters), nil
}

func (c *child) bench(ctx context.Context, comm *Comm, segP, segW uint64) {
	modes := []struct {
		name string
		base uint64
	}{{"nccl", segP}, {"nccl-window", segW}}
	for _, op := range []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce} {
		for _, total := range []int64{1 << 20, 64 << 20, 256 << 20} {
			iters := 100
			if total > 1<<20 {
				iters = 20
			}
			for _, m := range modes {
				us, err := c.benchOne(ctx, comm, op, total, m.base, iters)
				if err != nil {
					c.check(fmt.Sprintf("bench %v %d %s", op, total, m.name), err)
					continue
				}
				alg := float64(total) / us / 1e3 // GB/s
				c.logf("BENCH %-14v bf16 %10d B %-11s %9.1f us  algbw %6.1f  busbw %6.1f GB/s",
					op, total, m.name, us, alg, alg*coll.BusFactor(op, c.size))
			}
		}
	}
	// Host cost of issuing one small collective (wall time of the enqueue
	// loop: cgo crossing + cuCtxSetCurrent + NCCL's own enqueue).
	for _, m := range modes {
		const calls = 200
		in, out := m.base, m.base+1<<20
		cnt := int64(1<<20) / int64(c.size) / 2
		if err := comm.AllGather(in, out, cnt, coll.BFloat16, c.stream.Handle()); err != nil {
			c.check("host-cost warmup", err)
			continue
		}
		t0 := time.Now()
		var err error
		for i := 0; i < calls && err == nil; i++ {
			err = comm.AllGather(in, out, cnt, coll.BFloat16, c.stream.Handle())
		}
		host := time.Since(t0)
		if err == nil {
			err = c.stream.Wait(ctx, 30*time.Second)
		}
		if err != nil {
			c.check("host-cost "+m.name, err)
			continue
		}
		c.logf("HOST all_gather bf16 1 MiB %-11s %6.2f us of host time per call (%d calls)",
			m.name, float64(host.Nanoseconds())/calls/1e3, calls)
	}
}

// otherConfigs checks a communicator with CTA policy EFFICIENCY, tries CTA
// policy ZERO (NCCL's copy-engine collectives) for information, then a
// non-blocking communicator: correctness, host cost per call, and a peer
// that dies instead of registering.
func (c *child) otherConfigs(ctx context.Context, segP, segW uint64) {
	comm, err := New(ctx, Options{GroupName: "gputest-efficiency", Rank: c.rank, Size: c.size, Context: c.cctx.Handle(),
		Store: c.st, Timeout: 30 * time.Second, Config: Config{CTAPolicy: CTAPolicyEfficiency}})
	c.check("new comm, CTA policy efficiency", err)
	if err == nil {
		c.check("efficiency: all-reduce f32 sum 1M", c.verify(ctx, comm, 1000,
			tcase{kind: coll.AllReduce, dt: coll.Float32, op: coll.Sum, count: 1 << 20}, segP, coll.AlgoNCCL))
		c.check("efficiency: close", comm.Close(ctx))
	}
	c.ctaZero(ctx, segW)
	c.nonBlocking(ctx, segP, segW)
}

func (c *child) ctaZero(ctx context.Context, segW uint64) {
	zc, err := New(ctx, Options{GroupName: "gputest-zero", Rank: c.rank, Size: c.size, Context: c.cctx.Handle(),
		Store: c.st, Timeout: 30 * time.Second, Config: Config{CTAPolicy: CTAPolicyZero}})
	if err != nil {
		c.logf("INFO cta-policy zero: communicator: %v", err)
		return
	}
	defer func() { c.check("cta-policy zero: close", zc.Close(ctx)) }()
	if err := zc.Register(ctx, segW, segBytes); err != nil {
		c.logf("INFO cta-policy zero: register: %v", err)
		return
	}
	for i, per := range []int64{256 << 10, 4 << 20, 32 << 20, 64 << 20} {
		total := per * 2 * int64(c.size)
		err := c.verify(ctx, zc, 2000+i, tcase{kind: coll.AllGather, dt: coll.BFloat16, count: per}, segW, coll.AlgoNCCLWindow)
		c.logf("INFO cta-policy zero: all_gather bf16 %d B total on window: verify err=%v", total, err)
		if err != nil {
			return
		}
		us, err := c.benchOne(ctx, zc, coll.AllGather, total, segW, 20)
		if err != nil {
			c.logf("INFO cta-policy zero: bench: %v", err)
			return
		}
		alg := float64(total) / us / 1e3
		c.logf("BENCH %-14v bf16 %10d B %-11s %9.1f us  algbw %6.1f  busbw %6.1f GB/s",
			coll.AllGather, total, "cta-zero", us, alg, alg*coll.BusFactor(coll.AllGather, c.size))
	}
}

func (c *child) nonBlocking(ctx context.Context, segP, segW uint64) {
	nb, err := New(ctx, Options{GroupName: "gputest-nonblocking", Rank: c.rank, Size: c.size, Context: c.cctx.Handle(),
		Store: c.st, Timeout: 5 * time.Second, Config: Config{NonBlocking: true}})
	c.check("new non-blocking comm", err)
	if err != nil {
		return
	}
	c.check("non-blocking: register window", nb.Register(ctx, segW, segBytes))
	ws := nb.Windows()
	c.check("non-blocking: window is symmetric", boolErr(len(ws) == 1 && ws[0].Symmetric, "no symmetric window"))
	c.check("non-blocking: window all-gather bf16", c.verify(ctx, nb, 3000,
		tcase{kind: coll.AllGather, dt: coll.BFloat16, count: 100_001}, segW, coll.AlgoNCCLWindow))
	c.check("non-blocking: plain reduce-scatter f32 sum", c.verify(ctx, nb, 3001,
		tcase{kind: coll.ReduceScatter, dt: coll.Float32, op: coll.Sum, count: 100_001}, segP, coll.AlgoNCCL))
	const calls = 50
	t0 := time.Now()
	for i := 0; i < calls && err == nil; i++ {
		err = nb.AllGather(segW, segW+1<<20, 1<<18, coll.BFloat16, c.stream.Handle())
	}
	host := time.Since(t0)
	if err == nil {
		err = c.stream.Wait(ctx, 30*time.Second)
	}
	c.check("non-blocking: host-cost loop", err)
	c.logf("HOST all_gather bf16 1 MiB non-blocking comm %6.2f us of host time per call (%d calls)",
		float64(host.Nanoseconds())/calls/1e3, calls)
	c.check("non-blocking: deregister", nb.Deregister(ctx, segW))

	// Rank 1 dies (aborts its communicator) instead of registering; rank 0
	// must get an error within the timeout, and a broken communicator.
	if c.rank == 1 {
		c.check("dead peer: rank 1 aborts", nb.Abort())
		return
	}
	t0 = time.Now()
	err = nb.Register(ctx, segW, segBytes)
	took := time.Since(t0)
	c.logf("INFO dead peer: register returned after %v: %v", took.Round(time.Millisecond), err)
	c.check("dead peer: register fails within the timeout", boolErr(err != nil && took < 15*time.Second, "no error or too slow"))
	err = nb.AllReduce(segP, segP, 1, coll.Float32, coll.Sum, c.stream.Handle())
	c.check("dead peer: later calls fail", boolErr(err != nil, "call on a failed communicator succeeded"))
	c.logf("INFO dead peer: next call: %v", err)
	c.check("dead peer: close", nb.Close(ctx))
}
