package cudadrv

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/symmem/symmem/internal/errs"
)

func TestDevices(t *testing.T) {
	gpu(t)
	n, _ := DeviceCount()
	for d := 0; d < n; d++ {
		info, err := Info(d)
		if err != nil {
			t.Fatal(err)
		}
		if info.SMs <= 0 || info.AsyncEngines <= 0 {
			t.Errorf("device %d: implausible info %+v", d, info)
		}
		t.Logf("%+v", info)
	}
	m, err := P2PMatrix()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("p2p: %+v", m)
	if _, err := Info(n); err == nil {
		t.Errorf("Info(%d) of a missing device succeeded", n)
	}
}

// TestVMMExportImportSignals allocates VMM memory, exports and re-imports it
// as an fd, and runs a program of signal writes, waits and copies over it.
func TestVMMExportImportSignals(t *testing.T) {
	gpu(t)
	ctx, err := Retain(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Release()
	g, err := Granularity(0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Create(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	base, err := a.Map(ctx, g, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	fd, err := a.ExportFD()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Import(fd, g)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	alias, err := b.Map(ctx, g, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	src := make([]byte, 4096)
	for i := range src {
		src[i] = byte(rand.Uint32())
	}
	if err := Memset8(ctx, base, 0, g); err != nil {
		t.Fatal(err)
	}
	if err := CopyHtoD(ctx, base+8192, src); err != nil {
		t.Fatal(err)
	}
	s, err := NewStream(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	ev, _ := NewEvent(ctx, false)
	defer ev.Destroy()
	p := NewProgram(16)
	p.SetContext(ctx)
	p.BeginBatch(s.Handle())
	p.Write32(s.Handle(), alias, 7) // write through the imported mapping
	p.Wait32(s.Handle(), base, 7)   // observe through the original one
	p.EndBatch()
	p.Copy(s.Handle(), base+65536, alias+8192, int64(len(src)))
	p.Record(s.Handle(), ev.Handle())
	if err := p.Exec(); err != nil {
		t.Fatal(err)
	}
	if err := ev.Wait(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(src))
	if err := CopyDtoH(ctx, got, base+65536); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Fatal("copy through the imported mapping returned different bytes")
	}
	// A wait that can never be satisfied must surface as a timeout, and a
	// memset from another stream must release it.
	p.Reset()
	p.SetContext(ctx)
	p.Wait32(s.Handle(), base+4, 1)
	p.Record(s.Handle(), ev.Handle())
	if err := p.Exec(); err != nil {
		t.Fatal(err)
	}
	if err := ev.Wait(context.Background(), 50*time.Millisecond); err == nil {
		t.Fatal("wait on an unset word completed")
	}
	if err := CopyHtoD(ctx, base+4, []byte{1, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if err := ev.Wait(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, f := range []func() error{
		func() error { return Unmap(ctx, alias, g) }, b.Release,
		func() error { return Unmap(ctx, base, g) }, a.Release,
	} {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestExecError: recording a null event fails at issue time with the op named.
func TestExecError(t *testing.T) {
	gpu(t)
	ctx, err := Retain(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Release()
	s, _ := NewStream(ctx, 0)
	defer s.Destroy()
	p := NewProgram(4)
	p.SetContext(ctx)
	p.Record(s.Handle(), 0)
	if err := p.Exec(); err == nil {
		t.Fatal("recording a null event succeeded")
	} else {
		t.Log(err)
	}
	// A program that succeeds allocates nothing per Exec (the collectives'
	// zero-allocation path rests on it).
	ev, err := NewEvent(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Destroy()
	p.Reset()
	p.SetContext(ctx)
	p.Record(s.Handle(), ev.Handle())
	if allocs := testing.AllocsPerRun(100, func() {
		if err := p.Exec(); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("Exec allocates %.1f times per call", allocs)
	}
}

// BenchmarkExecSignalRoundTrip measures the host cost of issuing one
// write+wait batch and a small copy.
func BenchmarkExecSmall(b *testing.B) {
	if err := Load(); err != nil {
		b.Skip(err)
	}
	ctx, _ := Retain(0)
	defer ctx.Release()
	g, _ := Granularity(0)
	a, _ := Create(ctx, g)
	base, _ := a.Map(ctx, g, []int{0})
	s, _ := NewStream(ctx, 0)
	p := NewProgram(16)
	for i := 0; i < b.N; i++ {
		p.Reset()
		p.SetContext(ctx)
		p.BeginBatch(s.Handle())
		p.Write32(s.Handle(), base, uint32(i+1))
		p.Wait32(s.Handle(), base, uint32(i+1))
		p.EndBatch()
		p.Copy(s.Handle(), base+4096, base+8192, 4096)
		if err := p.Exec(); err != nil {
			b.Fatal(err)
		}
		if i%256 == 255 {
			s.Synchronize()
		}
	}
	s.Synchronize()
	s.Destroy()
	Unmap(ctx, base, g)
	a.Release()
}

// TestGraphCapture captures a signal write, a wait and a copy into a graph,
// replays it and checks the effects.
func TestGraphCapture(t *testing.T) {
	gpu(t)
	ctx, err := Retain(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Release()
	base, free := zeroed(t, ctx)
	defer free()
	src := make([]byte, 1000)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	if err := CopyHtoD(ctx, base+4096, src); err != nil {
		t.Fatal(err)
	}
	capS, _ := NewStream(ctx, 0)
	defer capS.Destroy()
	s, _ := NewStream(ctx, 0)
	defer s.Destroy()
	p := NewProgram(8)
	p.NoBatch = true
	p.SetContext(ctx)
	p.Write32(capS.Handle(), base, 5)
	p.Wait32(capS.Handle(), base, 5)
	p.Copy(capS.Handle(), base+65536, base+4096, int64(len(src)))
	if err := BeginCapture(ctx, capS); errors.Is(err, errs.NotSupported) {
		t.Skipf("driver lacks graph capture: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	perr := p.Exec()
	gr, err := EndCapture(ctx, capS)
	if perr != nil || err != nil {
		t.Fatal(perr, err)
	}
	defer gr.Destroy()
	for range 2 {
		if err := gr.Launch(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Wait(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(src))
	if err := CopyDtoH(ctx, got, base+65536); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Fatal("graph replay copied wrong bytes")
	}
}

// fillPTX stores P.v at P.dst[i] for i < P.n (one thread per word).
const fillPTX = `
.version 7.0
.target sm_70
.address_size 64
.visible .entry fill(.param .align 8 .b8 P[16])
{
	.reg .pred %p<2>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<6>;
	ld.param.u64 %rd1, [P+0];
	ld.param.u32 %r1, [P+8];
	ld.param.u32 %r2, [P+12];
	mov.u32 %r3, %tid.x;
	mov.u32 %r4, %ctaid.x;
	mov.u32 %r5, %ntid.x;
	mad.lo.u32 %r6, %r4, %r5, %r3;
	setp.ge.u32 %p1, %r6, %r2;
	@%p1 bra DONE;
	mul.wide.u32 %rd2, %r6, 4;
	add.u64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r1;
DONE:
	ret;
}
`

// TestKernelLaunch JIT-loads a PTX kernel, launches it through a Program
// with a parameter block, and checks every word it wrote (and one past).
func TestKernelLaunch(t *testing.T) {
	gpu(t)
	if !HaveKernels() {
		t.Skip("driver lacks module loading")
	}
	ctx, err := Retain(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Release()
	if _, err := LoadModule(ctx, []byte(".version 7.0\n.target sm_70\nthis is not PTX")); err == nil {
		t.Fatal("loading garbage PTX succeeded")
	} else {
		t.Logf("bad PTX: %v", err)
	}
	m, err := LoadModule(ctx, []byte(fillPTX))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unload()
	f, err := m.Function("fill")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Function("nope"); err == nil {
		t.Fatal("a missing kernel was found")
	}
	base, free := zeroed(t, ctx)
	defer free()
	s, _ := NewStream(ctx, 0)
	defer s.Destroy()
	args := NewArgs(16)
	defer args.Free()
	const words = 1000
	args.PutU64(0, base)
	args.PutU32(8, 0xC0FFEE)
	args.PutU32(12, words)
	p := NewProgram(4)
	p.SetContext(ctx)
	p.Launch(s.Handle(), f, args, 4, 256)
	if err := p.Exec(); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4*(words+1))
	if err := CopyDtoH(ctx, got, base); err != nil {
		t.Fatal(err)
	}
	for i := 0; i <= words; i++ {
		want := uint32(0xC0FFEE)
		if i == words {
			want = 0
		}
		if v := binary.LittleEndian.Uint32(got[4*i:]); v != want {
			t.Fatalf("word %d = %#x, want %#x", i, v, want)
		}
	}
}

// TestLaunchCost logs the CPU time of the launch path's pieces on this
// machine (medians over bursts of 8 right after a synchronisation): one cgo
// crossing that only makes the context current, and a tiny kernel's launch
// with and without that.
func TestLaunchCost(t *testing.T) {
	gpu(t)
	runtime.LockOSThread() // "alone" relies on the context made current before
	defer runtime.UnlockOSThread()
	if !HaveKernels() {
		t.Skip("driver lacks module loading")
	}
	ctx, err := Retain(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Release()
	m, err := LoadModule(ctx, []byte(fillPTX))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unload()
	f, _ := m.Function("fill")
	base, free := zeroed(t, ctx)
	defer free()
	s, _ := NewStream(ctx, 0)
	defer s.Destroy()
	args := NewArgs(16)
	defer args.Free()
	args.PutU64(0, base)
	args.PutU32(8, 1)
	args.PutU32(12, 1024)
	// median is the CPU time of one Exec of p: bursts of 8 right after a
	// synchronisation (the queue never blocks the caller), median of 200.
	median := func(p *Program) float64 {
		var per []float64
		for round := 0; round < 200; round++ {
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			for i := 0; i < 8; i++ {
				if err := p.Exec(); err != nil {
					t.Fatal(err)
				}
			}
			per = append(per, time.Since(t0).Seconds()*1e6/8)
		}
		slices.Sort(per)
		return per[len(per)/2]
	}
	program := func(withCtx bool, add func(p *Program)) *Program {
		p := NewProgram(4)
		if withCtx {
			p.SetContext(ctx)
		}
		if add != nil {
			add(p)
		}
		return p
	}
	launch := func(p *Program) { p.Launch(s.Handle(), f, args, 4, 256) }
	ctxOnly, both := median(program(true, nil)), median(program(true, launch))
	launchOnly := median(program(false, launch))
	fmt.Printf("LAUNCHCOST cgo+cuCtxSetCurrent %.2f us, cuCtxSetCurrent+cuLaunchKernel %.2f us, cuLaunchKernel alone %.2f us\n", ctxOnly, both, launchOnly)
	// Stream memory operations, the cheapest stream-ordered driver calls:
	// one write, and a batch of a write and a (satisfied) wait.
	write := median(program(false, func(p *Program) { p.Write32(s.Handle(), base+8192, 7) }))
	batch := median(program(false, func(p *Program) {
		p.BeginBatch(s.Handle())
		p.Write32(s.Handle(), base+8192, 7)
		p.Wait32(s.Handle(), base+8192, 7)
		p.EndBatch()
	}))
	fmt.Printf("LAUNCHCOST cuStreamWriteValue32 %.2f us, cuStreamBatchMemOp(write, wait) %.2f us\n", write, batch)
}

// zeroed maps one granule of zeroed VMM memory on device 0; free unmaps and
// releases it (defer it, so that it runs before the context is released).
func zeroed(t *testing.T, ctx *Context) (base uint64, free func()) {
	t.Helper()
	g, _ := Granularity(0)
	a, err := Create(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	base, err = a.Map(ctx, g, []int{0})
	if err != nil {
		a.Release()
		t.Fatal(err)
	}
	free = func() {
		Unmap(ctx, base, g)
		a.Release()
	}
	if err := Memset8(ctx, base, 0, g); err != nil {
		free()
		t.Fatal(err)
	}
	return base, free
}

// TestRegisterHostWait: a stream waits (cuStreamWaitValue32) on a word of a
// shared mapping (memfd, as the call gate's page) registered with
// RegisterHost: it holds while the word is below the value, goes on once
// the host writes it, and a word already there costs no wait. Timed: how
// long the satisfied wait takes on the GPU (event pair around 1000 waits).
func TestRegisterHostWait(t *testing.T) {
	gpu(t)
	ctx, err := Retain(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Release()
	fd, err := unix.MemfdCreate("symmem-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, 8192); err != nil {
		t.Fatal(err)
	}
	page, err := unix.Mmap(fd, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(page)
	reg, err := RegisterHost(ctx, page)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := reg.Unregister(); err != nil {
			t.Error(err)
		}
	}()
	word := (*uint32)(unsafe.Pointer(&page[64]))
	s, err := NewStream(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	p := NewProgram(4)
	p.SetContext(ctx)
	p.Wait32(s.Handle(), reg.Device()+64, 7)
	if err := p.Exec(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := s.Query(); err == nil {
		t.Fatal("the stream went past a wait for 7 on a word holding 0")
	}
	atomic.StoreUint32(word, 7)
	if err := s.Wait(context.Background(), 5*time.Second); err != nil {
		t.Fatalf("after the host wrote 7: %v", err)
	}
	ev0, _ := NewEvent(ctx, true)
	ev1, _ := NewEvent(ctx, true)
	defer ev0.Destroy()
	defer ev1.Destroy()
	for _, waits := range []int{0, 1000} {
		p.Reset()
		p.SetContext(ctx)
		p.Record(s.Handle(), ev0.Handle())
		for range waits {
			p.Wait32(s.Handle(), reg.Device()+64, 5)
		}
		p.Record(s.Handle(), ev1.Handle())
		if err := p.Exec(); err != nil {
			t.Fatal(err)
		}
		if err := s.Wait(context.Background(), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		ms, err := Elapsed(ev0, ev1)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d satisfied waits on registered host memory: %.2f us on the GPU", waits, ms*1000)
	}
}

// TestTrapEndsWait: a kernel that traps, launched on a stream of its own,
// ends a stream that waits (cuStreamWaitValue32) on a word nobody will
// write — in registered host memory (the call gate's page) or in device
// memory: the wait returns the launch failure within seconds. It ends the
// context, so it runs only when asked (SYMMEM_TEST_TRAP=host or device),
// alone in its process.
func TestTrapEndsWait(t *testing.T) {
	gpu(t)
	where := os.Getenv("SYMMEM_TEST_TRAP")
	if where == "" {
		t.Skip("ends the context: run alone with SYMMEM_TEST_TRAP=host or device")
	}
	ctx, err := Retain(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Release()
	var word uint64
	if where == "host" {
		page, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		reg, err := RegisterHost(ctx, page)
		if err != nil {
			t.Fatal(err)
		}
		word = reg.Device()
	} else {
		base, _ := zeroed(t, ctx)
		word = base
	}
	m, err := LoadModule(ctx, []byte(trapPTX))
	if err != nil {
		t.Fatal(err)
	}
	stop, err := m.Function("stop")
	if err != nil {
		t.Fatal(err)
	}
	// Blocked streams beyond the first occupy more of the device's work
	// queues (SYMMEM_TEST_TRAP_BLOCKED, default 1); the trap's stream has
	// priority SYMMEM_TEST_TRAP_PRIO (default 0).
	blocked, prio := 1, 0
	if v, err := strconv.Atoi(os.Getenv("SYMMEM_TEST_TRAP_BLOCKED")); err == nil {
		blocked = v
	}
	if v, err := strconv.Atoi(os.Getenv("SYMMEM_TEST_TRAP_PRIO")); err == nil {
		prio = v
	}
	p := NewProgram(4 + blocked)
	p.SetContext(ctx)
	var s *Stream
	for range blocked {
		s, _ = NewStream(ctx, 0)
		p.Wait32(s.Handle(), word, 1)
	}
	if err := p.Exec(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	s2, err := NewStream(ctx, prio)
	if err != nil {
		t.Fatal(err)
	}
	args := NewArgs(16)
	p.Reset()
	p.SetContext(ctx)
	p.Launch(s2.Handle(), stop, args, 1, 1)
	if err := p.Exec(); err != nil {
		t.Fatalf("launching the trap: %v", err)
	}
	t.Logf("trap launched in %v", time.Since(start))
	err = s.Wait(context.Background(), 10*time.Second)
	t.Logf("the waiting stream (word in %s memory) returned after %v: %v", where, time.Since(start), err)
	if err == nil || time.Since(start) > 8*time.Second {
		t.Fatalf("the trap did not end the wait: %v after %v", err, time.Since(start))
	}
}

const trapPTX = `
.version 7.0
.target sm_70
.address_size 64
.visible .entry stop(.param .align 8 .b8 P[16])
{
	trap;
}
`
