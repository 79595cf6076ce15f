package nccl

import (
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/native/libnccl"
)

// TestWindowBookkeeping checks the window table's search and the checks
// Register and Deregister make before calling NCCL (no GPU needed: every
// case here is refused before NCCL is reached).
func TestWindowBookkeeping(t *testing.T) {
	const mib = 1 << 20
	c := &Comm{group: "g", lib: &libnccl.Lib{HasWindows: true, Path: "fake"}, wins: []window{
		{ptr: 16 * mib, size: 4 * mib, win: 1},
		{ptr: 32 * mib, size: 2 * mib, win: 0}, // accepted by NCCL but not symmetric
		{ptr: 40 * mib, size: 8 * mib, win: 2},
	}}
	windowed := []struct {
		ptr  uint64
		n    int64
		want bool
	}{
		{16 * mib, 4 * mib, true}, {17 * mib, 1, true}, {20*mib - 1, 1, true},
		{20*mib - 1, 2, false}, {15 * mib, 2 * mib, false}, {33 * mib, 8, false},
		{44 * mib, 4 * mib, true}, {47 * mib, 2 * mib, false}, {8 * mib, 8, false}, {60 * mib, 8, false},
	}
	for _, w := range windowed {
		if got := c.Windowed(w.ptr, w.n); got != w.want {
			t.Errorf("Windowed(%#x, %d) = %v, want %v", w.ptr, w.n, got, w.want)
		}
	}
	refused := []struct {
		name      string
		ptr       uint64
		size      int64
		substring string
	}{
		{"null", 0, mib, "non-null"},
		{"empty", 64 * mib, 0, "positive"},
		{"misaligned ptr", 64*mib + 512, mib, "multiples of 4096"},
		{"misaligned size", 64 * mib, mib + 1, "multiples of 4096"},
		{"overlap start", 14 * mib, 4 * mib, "overlaps the window 0x1000000"},
		{"overlap inside", 41 * mib, mib, "overlaps the window 0x2800000"},
		{"same", 32 * mib, 2 * mib, "overlaps"},
	}
	for _, r := range refused {
		err := c.Register(t.Context(), r.ptr, r.size)
		if err == nil || !strings.Contains(err.Error(), r.substring) {
			t.Errorf("%s: Register(%#x, %d) = %v, want an error mentioning %q", r.name, r.ptr, r.size, err, r.substring)
		}
	}
	if err := c.Deregister(t.Context(), 17*mib); err == nil || !strings.Contains(err.Error(), "no window starts there") {
		t.Errorf("Deregister inside a window: %v", err)
	}
	ws := c.Windows()
	if len(ws) != 3 || !ws[0].Symmetric || ws[1].Symmetric || ws[2].Ptr != 40*mib {
		t.Errorf("Windows() = %+v", ws)
	}
	c.lib = &libnccl.Lib{Path: "old", Version: 22603}
	if err := c.Register(t.Context(), 64*mib, mib); err == nil || !strings.Contains(err.Error(), "2.26.3") {
		t.Errorf("Register without window support: %v", err)
	}
	c.closed = true
	c.lib.HasWindows = true
	if err := c.Register(t.Context(), 64*mib, mib); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Register on a closed comm: %v", err)
	}
}
