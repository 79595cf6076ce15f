package cudadrv

import (
	"testing"
	"unsafe"
)

// The driver ABI sizes come from cuda.h (CUDA 12/13, LP64).
func TestStructLayouts(t *testing.T) {
	got := cLayout()
	want := map[string]int{
		"CUmemAllocationProp":                 32,
		"CUmemAllocationProp.win32HandleMeta": 16,
		"CUmemAccessDesc":                     12,
		"CUstreamBatchMemOpParams":            48,
		"CUstreamBatchMemOpParams.value":      16,
		"CUstreamBatchMemOpParams.flags":      24,
		"CUstreamBatchMemOpParams.alias":      32,
		"symc_op":                             40,
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: C says %d, want %d", name, got[name], w)
		}
	}
	if s := int(unsafe.Sizeof(Op{})); s != got["symc_op"] {
		t.Errorf("Go Op is %d bytes, C symc_op is %d", s, got["symc_op"])
	}
	var o Op
	offs := []struct {
		name string
		got  uintptr
		want uintptr
	}{
		{"Kind", unsafe.Offsetof(o.Kind), 0}, {"Flags", unsafe.Offsetof(o.Flags), 4}, {"Stream", unsafe.Offsetof(o.Stream), 8},
		{"A", unsafe.Offsetof(o.A), 16}, {"B", unsafe.Offsetof(o.B), 24}, {"C", unsafe.Offsetof(o.C), 32},
	}
	for _, f := range offs {
		if f.got != f.want {
			t.Errorf("Op.%s at offset %d, want %d", f.name, f.got, f.want)
		}
	}
}

func TestProgramBatchHeader(t *testing.T) {
	tests := []struct {
		name    string
		nops    int
		wantLen int
		wantHdr bool
	}{
		{"empty batch dropped", 0, 0, false},
		{"single op not batched", 1, 1, false},
		{"two ops batched", 2, 3, true},
		{"thirty-two ops batched", 32, 33, true},
		{"too long, issued singly", 33, 33, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewProgram(8)
			p.BeginBatch(7)
			for i := 0; i < tc.nops; i++ {
				p.Write32(7, uint64(0x1000+4*i), uint32(i))
			}
			p.EndBatch()
			if p.Len() != tc.wantLen {
				t.Fatalf("len %d, want %d", p.Len(), tc.wantLen)
			}
			hdr := p.Len() > 0 && p.ops[0].Kind == OpBatch
			if hdr != tc.wantHdr {
				t.Fatalf("batch header present=%v, want %v", hdr, tc.wantHdr)
			}
			if hdr && int(p.ops[0].A) != tc.nops {
				t.Fatalf("batch count %d, want %d", p.ops[0].A, tc.nops)
			}
		})
	}
}

func TestExecRejectsOpenBatch(t *testing.T) {
	p := NewProgram(4)
	p.BeginBatch(1)
	p.Write32(1, 0x1000, 1)
	if err := p.Exec(); err == nil {
		t.Fatal("Exec with an open batch succeeded")
	}
}

func TestProgramReuseDoesNotAllocate(t *testing.T) {
	p := NewProgram(16)
	allocs := testing.AllocsPerRun(100, func() {
		p.Reset()
		p.BeginBatch(1)
		p.Write32(1, 0x1000, 1)
		p.Wait32(1, 0x2000, 1)
		p.EndBatch()
		p.Copy(1, 0x3000, 0x4000, 64)
	})
	if allocs != 0 {
		t.Fatalf("building a program allocates %.1f times", allocs)
	}
}

// TestOpKinds: the Go op kinds are the C ones (symc_exec switches on them).
func TestOpKinds(t *testing.T) {
	goKinds := map[string]int{"OpCtx": OpCtx, "OpWrite32": OpWrite32, "OpWait32": OpWait32, "OpCopy": OpCopy,
		"OpRecord": OpRecord, "OpWaitEvent": OpWaitEvent, "OpBatch": OpBatch, "OpMemset32": OpMemset32,
		"OpGraph": OpGraph, "OpLaunch": OpLaunch, "OpFence": OpFence}
	c := cOpKinds()
	for name, v := range goKinds {
		if c[name] != v {
			t.Errorf("%s = %d in Go, %d in shim.h", name, v, c[name])
		}
		if opNames[int32(v)] == "" {
			t.Errorf("%s has no name for errors", name)
		}
	}
	if len(c) != len(goKinds) {
		t.Errorf("%d kinds in C, %d in Go", len(c), len(goKinds))
	}
}
