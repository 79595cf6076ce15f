package hostmem

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const childEnv = "HOSTMEM_TEST_CHILD"

// TestMain runs the child role of TestFutexAcrossProcesses when re-executed.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "futex" {
		os.Exit(childFutex())
	}
	os.Exit(m.Run())
}

func TestAddrBytesRoundTrip(t *testing.T) {
	b := make([]byte, 64)
	for i := range b {
		b[i] = byte(i)
	}
	a := Addr(b)
	if a == 0 {
		t.Fatal("Addr of a live slice is 0")
	}
	if got := Addr(b[8:]); got != a+8 {
		t.Fatalf("Addr(b[8:]) = %#x, want %#x", got, a+8)
	}
	v := Bytes(a+3, 10)
	if len(v) != 10 || v[0] != 3 || v[9] != 12 {
		t.Fatalf("Bytes view = %v", v)
	}
	v[0] = 99
	if b[3] != 99 {
		t.Fatal("Bytes view does not alias the original memory")
	}
	if Addr(nil) != 0 || Bytes(a, 0) != nil {
		t.Fatal("empty cases must give 0 / nil")
	}
}

func TestBytesPanics(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr uint64
		n    int
		want string
	}{
		{"negative", 0x1000, -1, "negative length"},
		{"nil", 0, 4, "nil address"},
		{"wrap", ^uint64(0) - 2, 8, "wraps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(r.(string), tc.want) {
					t.Fatalf("panic = %v, want it to mention %q", r, tc.want)
				}
			}()
			Bytes(tc.addr, tc.n)
		})
	}
}

func TestWordsAtomicAndAlignment(t *testing.T) {
	buf := make([]uint64, 4) // 8-byte aligned backing array
	b := AsBytes(buf)
	a := Addr(b)
	p32 := Uint32At(a + 4)
	atomic.AddUint32(p32, 7)
	if b[4] != 7 {
		t.Fatalf("Uint32At does not alias memory: % x", b[:8])
	}
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"u32 misaligned", func() { Uint32At(a + 2) }, "not 4-byte aligned"},
		{"u32 nil", func() { Uint32At(0) }, "nil address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(r.(string), tc.want) {
					t.Fatalf("panic = %v, want it to mention %q", r, tc.want)
				}
			}()
			tc.f()
		})
	}
	if err := FutexWait(a+1, 0, time.Millisecond); err == nil || !strings.Contains(err.Error(), "aligned") {
		t.Fatalf("FutexWait on a misaligned word: err = %v", err)
	}
	if err := FutexWake(a+1, 1); err == nil {
		t.Fatal("FutexWake on a misaligned word must fail")
	}
}

func TestFutexValueMismatchReturnsAtOnce(t *testing.T) {
	w := new(uint32)
	*w = 5
	a := Addr(AsBytes(unsafe.Slice(w, 1)))
	start := time.Now()
	if err := FutexWait(a, 4, 10*time.Second); err != nil {
		t.Fatalf("FutexWait with a stale value: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("FutexWait with a stale value slept %v", d)
	}
	if err := FutexWait(a, 4, 0); err != nil {
		t.Fatalf("zero-timeout poll with a changed value: %v", err)
	}
}

func TestFutexTimeout(t *testing.T) {
	w := new(uint32)
	a := Addr(AsBytes(unsafe.Slice(w, 1)))
	for _, d := range []time.Duration{0, 30 * time.Millisecond} {
		start := time.Now()
		err := FutexWait(a, 0, d)
		el := time.Since(start)
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("timeout %v: err = %v, want ErrTimeout wrapping os.ErrDeadlineExceeded", d, err)
		}
		if el < d || el > d+2*time.Second {
			t.Fatalf("timeout %v: returned after %v", d, el)
		}
	}
}

func TestFutexWakeAcrossGoroutines(t *testing.T) {
	w := new(uint32)
	a := Addr(AsBytes(unsafe.Slice(w, 1)))
	const waiters = 4
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for atomic.LoadUint32(w) == 0 {
				if err := FutexWait(a, 0, 10*time.Second); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond) // let them sleep (correct either way)
	atomic.StoreUint32(w, 1)
	if err := FutexWake(a, 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("waiters not woken")
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestFutexAcrossProcesses proves the futex is shared, not private: a child
// process maps the same memfd page and sleeps on a word; the parent changes
// the word and wakes it.
func TestFutexAcrossProcesses(t *testing.T) {
	fd, err := unix.MemfdCreate("hostmem-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("memfd_create unavailable: %v", err)
	}
	f := os.NewFile(uintptr(fd), "memfd")
	defer f.Close()
	if err := f.Truncate(4096); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	base := Addr(mem)
	flag, ready := Uint32At(base), Uint32At(base+64)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=futex")
	cmd.ExtraFiles = []*os.File{f} // fd 3 in the child
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the child says it is about to sleep on flag.
	for atomic.LoadUint32(ready) == 0 {
		if err := FutexWait(base+64, 0, 10*time.Second); err != nil {
			_ = cmd.Process.Kill()
			t.Fatalf("child never became ready: %v\n%s", err, out.String())
		}
	}
	time.Sleep(20 * time.Millisecond)
	atomic.StoreUint32(flag, 42)
	if err := FutexWake(base, 0); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child failed: %v\n%s", err, out.String())
	}
	if got := atomic.LoadUint32(Uint32At(base + 128)); got != 42 {
		t.Fatalf("child saw %d, want 42", got)
	}
}

func childFutex() int {
	mem, err := unix.Mmap(3, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		println("child mmap:", err.Error())
		return 2
	}
	base := Addr(mem)
	flag := Uint32At(base)
	atomic.StoreUint32(Uint32At(base+64), 1)
	_ = FutexWake(base+64, 0)
	for atomic.LoadUint32(flag) == 0 {
		// A long timeout: if the wake were private the test would time out.
		if err := FutexWait(base, 0, 20*time.Second); err != nil {
			println("child wait:", err.Error())
			return 3
		}
	}
	atomic.StoreUint32(Uint32At(base+128), atomic.LoadUint32(flag))
	return 0
}

func TestViewAndAsBytes(t *testing.T) {
	f := []float32{1, 2, 3, 4}
	b := AsBytes(f)
	if len(b) != 16 {
		t.Fatalf("AsBytes length %d", len(b))
	}
	v, ok := View[float32](b)
	if !ok || len(v) != 4 || v[2] != 3 {
		t.Fatalf("View = %v %v", v, ok)
	}
	v[0] = 9
	if f[0] != 9 {
		t.Fatal("View does not alias")
	}
	for _, tc := range []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"misaligned", b[1:5], false},
		{"ragged length", b[:6], false},
		{"empty", b[:0], true},
		{"aligned sub-slice", b[4:12], true},
	} {
		if _, ok := View[float32](tc.b); ok != tc.ok {
			t.Errorf("%s: ok = %v, want %v", tc.name, ok, tc.ok)
		}
	}
	if v, ok := View[uint16](b[2:6]); !ok || len(v) != 2 {
		t.Errorf("uint16 view of 4 bytes at offset 2: %v %v", v, ok)
	}
}
