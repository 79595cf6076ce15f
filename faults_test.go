package symmem

import (
	"context"
	"errors"
	"fmt"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"math"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/doctor"
	"github.com/symmem/symmem/rendezvous"
)

// Bad input and faults: validation errors, checked mode, a killed rank, a
// hung rank, and nothing left behind.

func init() {
	roles["errors"] = roleErrors
	roles["checked"] = roleChecked
	roles["killed"] = roleKilled
	roles["hang"] = roleHang
	roles["leak"] = roleLeak
}

func TestErrors(t *testing.T) {
	t.Parallel()
	expectOK(t, spawn(t, 2, "errors"))
}

func TestCheckedMismatch(t *testing.T) {
	t.Parallel()
	expectOK(t, spawn(t, 2, "checked"))
}

// TestKilledRank: rank 1 of 3 dies (SIGKILL) in the middle of a run of
// all-reduces; the others must return an error naming rank 1 well within
// the timeout.
func TestKilledRank(t *testing.T) {
	t.Parallel()
	before := shmFiles(t)
	res := spawn(t, 3, "killed")
	if res[1].code == 0 {
		t.Errorf("rank 1 should have died:\n%s", res[1].out)
	}
	expectOK(t, []rankResult{res[0], {}, res[2]})
	noNewShm(t, before)
	for _, r := range []int{0, 2} {
		t.Logf("rank %d: %s", r, strings.TrimSpace(res[r].out))
	}
}

// TestHungRank: rank 1 of 2 stays alive but never joins; rank 0 must fail
// with a timeout naming rank 1, wrapping ErrTimeout (before, only
// context.DeadlineExceeded: no symmem sentinel) and DeadlineExceeded.
func TestHungRank(t *testing.T) {
	t.Parallel()
	res := spawn(t, 2, "hang")
	expectOK(t, res)
	t.Logf("rank 0: %s", strings.TrimSpace(res[0].out))
}

// TestNoLeak: after Close no memfd is open or mapped, and /dev/shm holds
// nothing new, also when a rank exits without Close.
func TestNoLeak(t *testing.T) {
	t.Parallel()
	before := shmFiles(t)
	expectOK(t, spawn(t, 2, "leak"))
	noNewShm(t, before)
}

func noNewShm(t *testing.T, before map[string]bool) {
	t.Helper()
	for name := range shmFiles(t) {
		if !before[name] {
			t.Errorf("/dev/shm/%s appeared during the job and outlived it", name)
		}
	}
}

func expectErr(what string, err, sentinel error, words ...string) error {
	if err == nil {
		return fmt.Errorf("%s: no error", what)
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		return fmt.Errorf("%s: error %q does not wrap %v", what, err, sentinel)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			return fmt.Errorf("%s: error %q does not mention %q", what, err, w)
		}
	}
	return nil
}

func roleErrors(ctx context.Context) error {
	o := testOptions()
	if n, derr := cudadrv.DeviceCount(); derr != nil || n == 0 { // only where no GPU is usable
		o.Backend = "cuda"
		if _, err := Init(ctx, o); expectErr("Init cuda", err, ErrNotSupported, "cuda") != nil {
			return expectErr("Init cuda", err, ErrNotSupported, "cuda")
		}
	}
	o.Backend = "tpu"
	if _, err := Init(ctx, o); expectErr("Init tpu", err, ErrInvalid, "tpu") != nil {
		return expectErr("Init tpu", err, ErrInvalid, "tpu")
	}
	w, err := Init(ctx, testOptions())
	if err != nil {
		return err
	}
	g := w.World()
	b, err := allocBufs(ctx, g, 4096)
	if err != nil {
		return err
	}
	in, out := b.in.Span, b.out.Span
	sub := func(s coll.Span, n int64) coll.Span { s.Len = n; return s }
	checks := []struct {
		what  string
		err   error
		is    error
		words []string
	}{}
	add := func(what string, err error, is error, words ...string) {
		checks = append(checks, struct {
			what  string
			err   error
			is    error
			words []string
		}{what, err, is, words})
	}
	_, err = g.ReduceScatter(ctx, sub(out, 8), sub(in, 20), coll.Float32, coll.Sum)
	add("RS count 5 on 2 ranks", err, ErrInvalid, "input count 5 is not divisible by the group size 2")
	_, err = g.AllGather(ctx, sub(out, 12), sub(in, 4), coll.Float32)
	add("AG out count 3", err, ErrInvalid, "not divisible by the group size 2")
	_, err = g.AllGather(ctx, sub(out, 16), sub(in, 4), coll.Float32)
	add("AG out too big", err, ErrInvalid, "want group size 2")
	_, err = g.AllReduce(ctx, sub(out, 6), sub(in, 6), coll.Float32, coll.Sum)
	add("AR 6 bytes of float32", err, ErrInvalid, "not a whole number of float32")
	huge := coll.Span{Ptr: in.Ptr, Len: math.MaxInt64 / 2 & ^int64(7)} // in*2 would wrap: refused before any multiplication
	_, err = g.AllGather(ctx, coll.Span{Ptr: out.Ptr, Len: (huge.Len * 2)}, huge, coll.Float32)
	add("AG past the address space", err, ErrInvalid, "past the end of the address space")
	_, err = g.AllReduce(ctx, sub(out, 8), sub(in, 8), coll.Float32, coll.ReduceOp(9))
	add("AR unknown op", err, ErrInvalid, "unknown reduction")
	_, err = g.AllReduce(ctx, sub(out, 8), sub(in, 8), coll.DType(42), coll.Sum)
	add("AR unknown dtype", err, ErrInvalid, "unknown dtype")
	_, err = g.Broadcast(ctx, sub(out, 8), 2, coll.Float32)
	add("broadcast root 2", err, ErrInvalid, "root 2")
	_, err = g.AllReduce(ctx, sub(out, 8), sub(in, 8), coll.Float32, coll.Sum, WithAlgo(coll.AlgoNCCL))
	add("algo nccl", err, ErrNotSupported, "nccl")
	_, err = w.NewGroup(ctx, "", []int{0})
	add("group without name", err, ErrInvalid, "empty name")
	_, err = w.NewGroup(ctx, "x", []int{0, 5})
	add("group rank 5", err, ErrInvalid, "rank 5")
	// Ranks disagree about a group: both fail, naming rank 1.
	ranks := []int{0, 1}
	if w.Rank() == 1 {
		ranks = []int{1}
	}
	_, err = w.NewGroup(ctx, "disagree", ranks)
	add("NewGroup mismatch", err, ErrMismatch, "rank 1")
	for _, c := range checks {
		if err := expectErr(c.what, c.err, c.is, c.words...); err != nil {
			return err
		}
	}
	// A group of one rank: rank 1 is not a member.
	solo, err := w.NewGroup(ctx, "solo", []int{0})
	if err != nil {
		return err
	}
	sb, err := allocBufs(ctx, solo, 64)
	if err != nil {
		return err
	}
	_, err = solo.AllReduce(ctx, sb.out.Span, sb.in.Span, coll.Float32, coll.Sum)
	if w.Rank() == 1 {
		if err := expectErr("non-member AllReduce", err, ErrNotMember, "solo"); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("AllReduce on a group of one: %w", err)
	}
	// Doctor and Explain describe the setup and the paths.
	rep := w.Doctor()
	if rep.Backend != "cpu" || rep.Rank != w.Rank() || rep.Size != 2 || len(rep.Groups) != 2 || rep.Pool.Segments == 0 ||
		len(rep.Paths) != len(doctor.Kinds)*len(doctor.Sizes)*2 || !rep.Groups[1].Member == (w.Rank() == 0) {
		return fmt.Errorf("doctor report: %+v", rep)
	}
	if p := w.Explain(coll.AllGather, 1<<20, false); !p.Staged || p.Algo != coll.AlgoDirect || !strings.Contains(p.Reason, "staged") {
		return fmt.Errorf("Explain(ordinary memory) = %v", p)
	}
	if p := w.Explain(coll.AllReduce, 1<<20, true); p.Staged || !strings.Contains(p.Reason, "symmetric") {
		return fmt.Errorf("Explain(symmetric) = %v", p)
	}
	// After all of that, the world still works.
	if err := runCase(ctx, g, coll.AllReduce, coll.Float32, coll.Sum, "sym", 16, b, 77); err != nil {
		return err
	}
	return w.Close()
}

func roleChecked(ctx context.Context) error {
	o := testOptions()
	o.Checked = true
	w, err := Init(ctx, o)
	if err != nil {
		return err
	}
	g := w.World()
	b, err := allocBufs(ctx, g, 8192)
	if err != nil {
		return err
	}
	dt := coll.Float32
	if w.Rank() == 1 {
		dt = coll.Float64
	}
	_, err = g.AllReduce(ctx, b.out.Span, b.in.Span, dt, coll.Sum)
	if err := expectErr("dtype mismatch", err, ErrMismatch, "rank 1", "float64", "float32"); err != nil {
		return err
	}
	count := int64(512)
	if w.Rank() == 1 {
		count = 256
	}
	s := func(x Buffer) coll.Span { return coll.Span{Ptr: x.Ptr, Len: count * 4} }
	_, err = g.AllReduce(ctx, s(b.out), s(b.in), coll.Float32, coll.Max)
	if err := expectErr("count mismatch", err, ErrMismatch, "rank 1", "count=256"); err != nil {
		return err
	}
	// Matching calls still work, including staged ones.
	for _, mode := range []string{"sym", "staged"} {
		if err := runCase(ctx, g, coll.AllReduce, coll.BFloat16, coll.Avg, mode, 100, b, 3); err != nil {
			return err
		}
	}
	// The store keeps nothing of the finished exchange (the registration
	// above was an all-gather through it; the checked calls and scope ends
	// compare in-band on one host; World.Close's exchange comes next).
	for seq := range 1 {
		base := fmt.Sprintf("symmem/%s/shm/world#0/ag/%d/", w.env.JobID, seq)
		for _, k := range []string{base + "0", base + "1", base + "done"} {
			if v, err := w.store.Get(ctx, k); !errors.Is(err, rendezvous.ErrNotFound) {
				return fmt.Errorf("store key %s still there (%q, %v)", k, v, err)
			}
		}
	}
	return w.Close()
}

func roleKilled(ctx context.Context) error {
	o := testOptions()
	o.Timeout = 10 * time.Second
	w, err := Init(ctx, o)
	if err != nil {
		return err
	}
	g := w.World()
	b, err := allocBufs(ctx, g, 1<<20)
	if err != nil {
		return err
	}
	if err := runCase(ctx, g, coll.AllReduce, coll.Float32, coll.Sum, "sym", 1000, b, 1); err != nil {
		return err
	}
	// Rank 1 dies (SIGKILL, no cleanup) at a moment it does not choose,
	// while every rank loops over all-reduces, so it dies inside one.
	if w.Rank() == 1 {
		time.AfterFunc(20*time.Millisecond, func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) })
	}
	var start time.Time
	for i := 0; err == nil; i++ {
		if i == 1e6 {
			return errors.New("rank 1 never died")
		}
		start = time.Now()
		_, err = g.AllReduce(ctx, b.out.Span, b.in.Span, coll.Float32, coll.Sum)
	}
	took := time.Since(start)
	if err := expectErr("AllReduce with a dead rank", err, nil, "rank 1"); err != nil {
		return err
	}
	if took > o.Timeout {
		return fmt.Errorf("error came after %v, beyond the %v timeout", took, o.Timeout)
	}
	fmt.Printf("error after %v: %v\n", took.Round(time.Millisecond), err)
	// The group is unusable now, and says so at once.
	_, err = g.AllGather(ctx, coll.Span{Ptr: b.out.Ptr, Len: 12}, coll.Span{Ptr: b.in.Ptr, Len: 4}, coll.Float32)
	if err == nil {
		return errors.New("AllGather on a broken group succeeded")
	}
	return nil // exit without Close: the memfds die with the process
}

func roleHang(ctx context.Context) error {
	o := testOptions()
	o.Timeout = 1500 * time.Millisecond
	w, err := Init(ctx, o)
	if err != nil {
		return err
	}
	g := w.World()
	b, err := allocBufs(ctx, g, 4096)
	if err != nil {
		return err
	}
	if w.Rank() == 1 {
		time.Sleep(3 * time.Second) // alive, but never joins
		return nil
	}
	start := time.Now()
	_, err = g.AllGather(ctx, coll.Span{Ptr: b.out.Ptr, Len: 8}, coll.Span{Ptr: b.in.Ptr, Len: 4}, coll.Float32)
	took := time.Since(start)
	// Both the symmem sentinel and the deadline error it met.
	for _, want := range []error{ErrTimeout, context.DeadlineExceeded} {
		if err := expectErr("AllGather with an absent rank", err, want, "rank 1"); err != nil {
			return err
		}
	}
	if took > 3*time.Second {
		return fmt.Errorf("error came after %v (timeout 1.5 s)", took)
	}
	fmt.Printf("error after %v: %v\n", took.Round(time.Millisecond), err)
	return nil
}

func roleLeak(ctx context.Context) error {
	for round := range 2 {
		w, err := Init(ctx, testOptions())
		if err != nil {
			return err
		}
		g := w.World()
		b, err := allocBufs(ctx, g, 1<<20)
		if err != nil {
			return err
		}
		if err := runCase(ctx, g, coll.AllGather, coll.Int64, coll.Sum, "sym", 1000, b, uint64(round)); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		if err := noMemfd(); err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
	}
	return nil
}

// noMemfd fails if this process still has a symmem memfd open or mapped.
func noMemfd() error {
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.Contains(l, "memfd:symmem") {
			return fmt.Errorf("fd %s still open after Close: %s", e.Name(), l)
		}
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(maps), "\n") {
		if strings.Contains(line, "memfd:symmem") {
			return fmt.Errorf("still mapped after Close: %s", line)
		}
	}
	return nil
}
