package nccl

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/libnccl"
)

// fakeLib builds testdata/fakenccl.c — a stand-in libnccl.so.2 for one-rank
// communicators over host memory — with the C compiler cgo uses, and opens
// it. NCCL code paths then run without a GPU: a communicator whose handle
// was lost (every collective panicked on the GPU machine, 2026-11-23) fails
// here.
func fakeLib(t *testing.T, cflags ...string) *libnccl.Lib {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%s) to build the fake NCCL: %v", cc, err)
	}
	so := filepath.Join(t.TempDir(), "libnccl.so.2")
	args := append([]string{"-shared", "-fPIC", "-O1", "-o", so}, cflags...)
	if out, err := exec.Command(cc, append(args, "testdata/fakenccl.c")...).CombinedOutput(); err != nil {
		t.Fatalf("building the fake NCCL: %v\n%s", err, out)
	}
	lib, err := libnccl.Open([]string{so})
	if err != nil {
		t.Fatal(err)
	}
	if lib.HasWindows {
		t.Fatal("the fake NCCL has no window registration, the loader says it has")
	}
	return lib
}

func addrOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }

// A one-rank communicator on the fake library: created through the store
// rendezvous, every collective enqueued through the real code path (the
// fake copies, as NCCL does for one rank), closed cleanly, unusable after.
func TestFakeOneRank(t *testing.T) {
	lib := fakeLib(t)
	c, err := New(t.Context(), Options{Timeout: time.Minute, GroupName: "g", Rank: 0, Size: 1, Store: newMemStore(), Lib: lib})
	if err != nil {
		t.Fatal(err)
	}
	in, out := make([]byte, 4096), make([]byte, 4096)
	for i := range in {
		in[i] = byte(i*7 + 1)
	}
	count := int64(len(in) / 4)
	calls := []struct {
		name string
		run  func() error
	}{
		{"all-gather", func() error { return c.AllGather(addrOf(in), addrOf(out), count, coll.Float32, 0) }},
		{"reduce-scatter", func() error {
			return c.ReduceScatter(addrOf(in), addrOf(out), count, coll.Float32, coll.Sum, 0)
		}},
		{"all-reduce", func() error { return c.AllReduce(addrOf(in), addrOf(out), count, coll.Float32, coll.Sum, 0) }},
		{"broadcast", func() error { return c.Broadcast(addrOf(in), addrOf(out), count, coll.Float32, 0, 0) }},
	}
	for _, k := range calls {
		clear(out)
		if err := k.run(); err != nil {
			t.Fatalf("%s: %v", k.name, err)
		}
		runtime.KeepAlive(in)
		if !bytes.Equal(out, in) {
			t.Errorf("%s of one rank: output differs from the input", k.name)
		}
	}
	if err := c.AllReduce(addrOf(in), addrOf(out), count, coll.Float32, coll.ReduceOp(99), 0); err == nil {
		t.Error("an unknown reduction op reached NCCL")
	}
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.AllReduce(addrOf(in), addrOf(out), count, coll.Float32, coll.Sum, 0); err == nil {
		t.Error("a collective on a closed communicator succeeded")
	}
}

// TestFakeAllToAll: equal blocks through ncclAlltoAll where NCCL has it,
// else (and split counts always) through a group of ncclSend and ncclRecv;
// a request with split counts goes through RunDecided.
func TestFakeAllToAll(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cflags []string
		a2a    bool
	}{
		{"alltoall", nil, true},
		{"send/recv", []string{"-DNO_ALLTOALL"}, false},
	} {
		lib := fakeLib(t, tc.cflags...)
		if lib.HasAllToAll != tc.a2a || !lib.HasSendRecv {
			t.Fatalf("%s: HasAllToAll %v, HasSendRecv %v", tc.name, lib.HasAllToAll, lib.HasSendRecv)
		}
		c, err := New(t.Context(), Options{Timeout: time.Minute, GroupName: "a2a-" + tc.name, Rank: 0, Size: 1, Store: newMemStore(), Lib: lib})
		if err != nil {
			t.Fatal(err)
		}
		in, out := make([]byte, 256), make([]byte, 256)
		for i := range in {
			in[i] = byte(i*5 + 3)
		}
		if err := c.AllToAll(addrOf(in), addrOf(out), 64, coll.Float32, 0); err != nil {
			t.Fatalf("%s: equal: %v", tc.name, err)
		}
		if !bytes.Equal(out, in) {
			t.Errorf("%s: equal blocks of one rank: output differs from the input", tc.name)
		}
		clear(out)
		req := backend.Request{Kind: coll.AllToAll, DType: coll.Int32, In: coll.Span{Ptr: addrOf(in), Len: 40}, Out: coll.Span{Ptr: addrOf(out), Len: 40},
			A2A: &backend.Splits{Form: backend.SplitsHost, Send: []int64{10}, Recv: []int64{10}}}
		if _, err := c.RunDecided(t.Context(), req, false); err != nil {
			t.Fatalf("%s: split counts: %v", tc.name, err)
		}
		runtime.KeepAlive(in)
		if !bytes.Equal(out[:40], in[:40]) || out[40] != 0 {
			t.Errorf("%s: split counts of one rank: output differs from the input's first 40 bytes", tc.name)
		}
		req.A2A.Recv = []int64{9} // the fake refuses a receive that matches no send
		if _, err := c.RunDecided(t.Context(), req, false); err == nil {
			t.Errorf("%s: mismatched counts reached NCCL and succeeded", tc.name)
		}
		req.A2A.Form = backend.SplitsDevice
		if _, err := c.RunDecided(t.Context(), req, false); !errors.Is(err, errs.NotSupported) {
			t.Errorf("%s: device split counts: %v, want ErrNotSupported", tc.name, err)
		}
	}
}

// TestFakeStop: Stop revokes where NCCL has ncclCommRevoke (later calls fail
// with errs.Broken, Close destroys without the finalize a revoked
// communicator refuses) and aborts where it has not (errs.Closed after).
func TestFakeStop(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cflags []string
		revoke bool
		after  error
	}{
		{"revoke", nil, true, errs.Broken},
		{"abort", []string{"-DNO_REVOKE"}, false, errs.Closed},
	} {
		lib := fakeLib(t, tc.cflags...)
		if lib.HasRevoke != tc.revoke {
			t.Fatalf("%s: HasRevoke %v, want %v", tc.name, lib.HasRevoke, tc.revoke)
		}
		c, err := New(t.Context(), Options{Timeout: time.Minute, GroupName: "stop-" + tc.name, Rank: 0, Size: 1, Store: newMemStore(), Lib: lib})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Stop(); err != nil {
			t.Fatalf("%s: Stop: %v", tc.name, err)
		}
		if err := c.Stop(); err != nil {
			t.Fatalf("%s: second Stop: %v", tc.name, err)
		}
		in, out := make([]byte, 64), make([]byte, 64)
		if err := c.AllReduce(addrOf(in), addrOf(out), 16, coll.Float32, coll.Sum, 0); !errors.Is(err, tc.after) {
			t.Errorf("%s: a collective after Stop: %v, want %v", tc.name, err, tc.after)
		}
		if err := c.Close(t.Context()); err != nil {
			t.Errorf("%s: Close after Stop: %v", tc.name, err)
		}
		// Abandon: the same stop, and Close leaves a revoked communicator
		// to NCCL (no destroy), an aborted one closed.
		c, err = New(t.Context(), Options{Timeout: time.Minute, GroupName: "abandon-" + tc.name, Rank: 0, Size: 1, Store: newMemStore(), Lib: lib})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Abandon(); err != nil {
			t.Fatalf("%s: Abandon: %v", tc.name, err)
		}
		if c.abandoned != tc.revoke {
			t.Errorf("%s: abandoned %v after Abandon, want %v", tc.name, c.abandoned, tc.revoke)
		}
		if err := c.Close(t.Context()); err != nil {
			t.Errorf("%s: Close after Abandon: %v", tc.name, err)
		}
	}
}
