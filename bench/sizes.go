package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/symmem/symmem/coll"
)

// ParseSize parses a byte count like nccl-tests' -b/-e: a plain number of
// bytes, or a number with a suffix K, M, G (powers of 1024; "KiB", "KB",
// "k" are accepted too).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	u := strings.ToUpper(t)
	mult := int64(1)
	for _, suf := range []struct {
		s string
		m int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(u, suf.s) {
			mult, u = suf.m, strings.TrimSuffix(u, suf.s)
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(u), 10, 64)
	if err != nil || n <= 0 || n > (1<<50)/mult {
		return 0, fmt.Errorf("bad size %q: want a positive byte count such as 1024, 64K, 256M or 1G", s)
	}
	return n * mult, nil
}

// FormatSize writes bytes compactly (1K, 64M, 1G, or plain bytes).
func FormatSize(b int64) string { return coll.FormatSize(b) }

// Sizes returns the sweep from begin to end (inclusive), multiplying by
// factor each step, like nccl-tests -b -e -f.
func Sizes(begin, end int64, factor int) ([]int64, error) {
	if begin <= 0 || end <= 0 {
		return nil, fmt.Errorf("sizes must be positive (got -b %d -e %d)", begin, end)
	}
	if end < begin {
		return nil, fmt.Errorf("end size %s is smaller than begin size %s: swap -b and -e", FormatSize(end), FormatSize(begin))
	}
	if factor < 2 && begin != end {
		return nil, fmt.Errorf("size factor -f %d must be at least 2", factor)
	}
	var out []int64
	for s := begin; s <= end; s *= int64(factor) {
		out = append(out, s)
		if factor < 2 || s > end/int64(factor) {
			break
		}
	}
	return out, nil
}

// layout is the element geometry of one op at one size, following
// nccl-tests: bytes is the full tensor (gathered output for all-gather,
// pre-reduction input for reduce-scatter, one rank's input for all-to-all),
// rounded down so that every rank gets whole elements.
type layout struct {
	bytes    int64 // full tensor bytes (size column)
	total    int64 // full tensor elements (count column)
	perRank  int64 // AllGather input / ReduceScatter output / AllToAll block elements
	inBytes  int64 // bytes of one rank's input
	outBytes int64 // bytes of one rank's output
	runCount int64 // count passed to Target.Run
}

func layoutFor(k coll.Kind, size int64, esize, n int) layout {
	total := size / int64(esize)
	var l layout
	switch k {
	case coll.AllToAll: // count blocks of per elements, to and from each rank
		per := total / int64(n)
		total = per * int64(n)
		l = layout{total: total, perRank: per, runCount: per, inBytes: total * int64(esize), outBytes: total * int64(esize)}
	case coll.AllGather, coll.ReduceScatter:
		per := total / int64(n)
		total = per * int64(n)
		l = layout{total: total, perRank: per, runCount: per}
		if k == coll.AllGather {
			l.inBytes, l.outBytes = per*int64(esize), total*int64(esize)
		} else {
			l.inBytes, l.outBytes = total*int64(esize), per*int64(esize)
		}
	default:
		l = layout{total: total, perRank: total, runCount: total,
			inBytes: total * int64(esize), outBytes: total * int64(esize)}
	}
	l.bytes = l.total * int64(esize)
	return l
}
