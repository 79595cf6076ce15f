package cuda

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/native/cuda"
)

// TestKernelPTXMatchesGo: the PTX reads exactly the parameter offsets
// kernel.go writes, declares the block's size, and uses the region offsets.
func TestKernelPTXMatchesGo(t *testing.T) {
	src := string(allGatherPTX)
	if !strings.Contains(src, fmt.Sprintf(".b8 P[%d]", kernArgBytes)) {
		t.Fatalf("the PTX does not declare a %d-byte parameter block", kernArgBytes)
	}
	if !strings.Contains(src, ".entry symmem_allgather_push(") {
		t.Fatal("entry symmem_allgather_push missing")
	}
	var got []int
	for _, m := range regexp.MustCompile(`\[P\+(\d+)\]`).FindAllStringSubmatch(src, -1) {
		off, _ := strconv.Atoi(m[1])
		if !slices.Contains(got, off) {
			got = append(got, off)
		}
	}
	slices.Sort(got)
	want := []int{argIn, argSlice, argRegion, argMe, argN, argMask, argTimeout}
	for r := 0; r < kernMaxRanks; r++ {
		want = append(want, argDst+8*r, argPeerRegion+8*r)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("PTX reads parameter offsets %v, kernel.go writes %v", got, want)
	}
	if argPeerRegion+8*kernMaxRanks != argTimeout || argTimeout+8 != kernArgBytes {
		t.Fatalf("block layout: peer regions end at %d, timeout at %d, size %d", argPeerRegion+8*kernMaxRanks, argTimeout, kernArgBytes)
	}
	// ready at 4*kernMaxCTAs, done after kernMaxCTAs*kernMaxRanks words.
	ready, done := 4*kernMaxCTAs, 4*kernMaxCTAs+4*kernMaxCTAs*kernMaxRanks
	for _, off := range []int{ready, done} {
		if !strings.Contains(src, ", "+strconv.Itoa(off)+";") {
			t.Errorf("PTX never adds region offset %d", off)
		}
	}
	if done+4*kernMaxCTAs*kernMaxRanks > 64<<10 {
		t.Fatal("kernel region does not fit below 64 KiB")
	}
}

func TestKernelArgs(t *testing.T) {
	tests := []struct {
		name    string
		n, me   int
		inPlace bool
		mask    uint32
	}{
		{"2 ranks out-of-place", 2, 0, false, 0b11},
		{"2 ranks in-place", 2, 1, true, 0b01},
		{"4 ranks out-of-place", 4, 2, false, 0b1111},
		{"8 ranks in-place", 8, 7, true, 0b0111_1111},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := fakeGroup(tc.n, tc.me)
			g.kargs = cuda.NewArgs(kernArgBytes)
			defer g.kargs.Free()
			const count = 4096
			req := gatherReq(g, count, tc.inPlace)
			if err := g.fillKernelArgs(req); err != nil {
				t.Fatal(err)
			}
			b := g.kargs.Bytes()
			u64 := func(off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }
			u32 := func(off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
			slice := uint64(count * 2)
			if u64(argIn) != req.In.Ptr || u64(argSlice) != slice || u32(argMe) != uint32(tc.me) || u32(argN) != uint32(tc.n) {
				t.Fatalf("header: in %#x slice %d me %d n %d", u64(argIn), u64(argSlice), u32(argMe), u32(argN))
			}
			if u64(argTimeout) != uint64(g.timeout.Nanoseconds()) || g.timeout <= 0 {
				t.Fatalf("watchdog %d ns, group timeout %v", u64(argTimeout), g.timeout)
			}
			if u32(argMask) != tc.mask {
				t.Fatalf("mask %b, want %b", u32(argMask), tc.mask)
			}
			if u64(argRegion) != g.padPeers[tc.me]+kernRegion {
				t.Fatalf("own region %#x", u64(argRegion))
			}
			for r := 0; r < tc.n; r++ {
				// Target r receives this rank's slice at slot me of r's output.
				want := g.segs[1].bases[r] + uint64(tc.me)*slice
				if got := u64(argDst + 8*r); got != want {
					t.Fatalf("dst[%d] = %#x, want %#x", r, got, want)
				}
				if got := u64(argPeerRegion + 8*r); got != g.padPeers[r]+kernRegion {
					t.Fatalf("region[%d] = %#x", r, got)
				}
			}
		})
	}
}

func TestKernelCTAs(t *testing.T) {
	tests := []struct {
		slice int64
		limit int
		want  int
	}{
		{16, 32, 1},
		{kernThreads * 16 * kernVecsPerThread, 32, 1},
		{kernThreads*16*kernVecsPerThread + 16, 32, 2},
		{512 << 10, 64, 16}, // 1 MiB all-gather on 2 ranks
		{8 << 20, 64, 64},
		{8 << 20, 200, kernMaxCTAs},
		{1 << 30, 8, 8},
	}
	for _, tt := range tests {
		if got := kernelCTAs(tt.slice, tt.limit); got != tt.want {
			t.Errorf("kernelCTAs(%d, %d) = %d, want %d", tt.slice, tt.limit, got, tt.want)
		}
	}
}
