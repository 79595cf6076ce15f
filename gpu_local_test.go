package symmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/rendezvous"
)

func init() { roles["gpulocal"] = roleGPULocalBuffers }

// TestGPUWorldLocalBuffers: ordinary (non-pool) buffers of a cuda call must
// be device memory of the rank's GPU. Ordinary device memory runs; a host
// address is refused on every rank before any peer is involved, with an
// error naming the argument and what it is (the Python package relies on
// this instead of reading each tensor's device).
func TestGPUWorldLocalBuffers(t *testing.T) { gpuSpawn(t, "gpulocal") }

func roleGPULocalBuffers(ctx context.Context) error {
	w, err := gpuWorld(ctx, Options{})
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	if d := w.Device(); d < 0 {
		return fmt.Errorf("Device() = %d on the cuda backend", d)
	}
	const bytes = 4096
	in, err := w.AllocLocal(bytes)
	if err != nil {
		return err
	}
	defer w.Free(in)
	out, err := w.AllocLocal(bytes)
	if err != nil {
		return err
	}
	defer w.Free(out)
	// Ordinary device memory passes the check and runs on NCCL (which
	// ranks sharing a GPU do not have: there it runs only where auto takes
	// it to ll, which gpu_test.go's gpuNCCLRefused checks).
	if os.Getenv(rendezvous.VarShareDevice) != "1" {
		if _, err := g.AllReduce(ctx, out.Span, in.Span, coll.Float32, coll.Sum); err != nil {
			return fmt.Errorf("all-reduce of ordinary device memory: %w", err)
		}
	}
	host := make([]float32, bytes/4)
	hs := coll.Span{Ptr: uint64(uintptr(unsafe.Pointer(&host[0]))), Len: bytes}
	for _, c := range []struct {
		name    string
		out, in coll.Span
		want    string
	}{
		{"host in", out.Span, hs, "in: 0x"},
		{"host out", hs, in.Span, "out: 0x"},
	} {
		_, err := g.AllReduce(ctx, c.out, c.in, coll.Float32, coll.Sum)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "is host memory") {
			return fmt.Errorf("%s: %v, want an invalid-argument error naming %q and host memory", c.name, err, c.want)
		}
	}
	bufs, err := gpuAlloc(ctx, g, bytes, bytes)
	if err != nil {
		return err
	}
	if _, err := g.AllReduce(ctx, bufs[1].Span, bufs[0].Span, coll.Float32, coll.Sum); err != nil {
		return fmt.Errorf("all-reduce of pool memory after the refusals: %w", err)
	}
	return w.Synchronize(ctx)
}
