package coll

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestParseDType(t *testing.T) {
	tests := []struct {
		in   string
		want DType
		ok   bool
	}{
		{"float32", Float32, true}, {"fp32", Float32, true}, {"BF16", BFloat16, true},
		{"bfloat16", BFloat16, true}, {"half", Float16, true}, {"int64", Int64, true},
		{"int8", Int8, true}, {"u8", Uint8, true}, {"float8", 0, false}, {"", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseDType(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("ParseDType(%q) = %v, %v; want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
	for _, d := range DTypes() {
		if got, err := ParseDType(d.String()); err != nil || got != d {
			t.Errorf("round trip %v: %v %v", d, got, err)
		}
		if d.Size() <= 0 {
			t.Errorf("%v has size %d", d, d.Size())
		}
	}
	if DType(99).Valid() || DType(-1).Valid() {
		t.Error("out-of-range dtype reported valid")
	}
}

func TestParseKindAndOp(t *testing.T) {
	// The documented spellings of each op, in any case; nothing else (the
	// separators were dropped wherever they stood: "a-l-l-gather" was
	// all_gather).
	for in, want := range map[string]Kind{
		"all_gather": AllGather, "all-gather": AllGather, "allgather": AllGather, "ag": AllGather, "AG": AllGather, "All_Gather": AllGather,
		"reduce_scatter": ReduceScatter, "reduce-scatter": ReduceScatter, "reducescatter": ReduceScatter, "RS": ReduceScatter,
		"all_reduce": AllReduce, "all-reduce": AllReduce, "allreduce": AllReduce, "ar": AllReduce,
		"broadcast": Broadcast, "bc": Broadcast, "bcast": Broadcast, "BROADCAST": Broadcast,
		"all_to_all": AllToAll, "all-to-all": AllToAll, "alltoall": AllToAll, "A2A": AllToAll,
	} {
		if got, err := ParseKind(in); err != nil || got != want {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"all2all", "", "all__gather", "a-l-l-gather", "allgather_", "_ag", "a_g", "all_-gather",
		"reduce_scatter-", "b-c", "broad_cast", "all_gather ", "all gather"} {
		_, err := ParseKind(in)
		if err == nil || !strings.Contains(err.Error(), "all_gather (all-gather, allgather, ag)") || !strings.Contains(err.Error(), "all_to_all (all-to-all, alltoall, a2a)") {
			t.Errorf("ParseKind(%q): %v, want an error listing the accepted names", in, err)
		}
	}
	for _, op := range []ReduceOp{Sum, Avg, Min, Max} {
		if got, err := ParseReduceOp(op.String()); err != nil || got != op {
			t.Errorf("ParseReduceOp(%v) = %v, %v", op, got, err)
		}
	}
	if _, err := ParseReduceOp("prod"); err == nil {
		t.Error("ParseReduceOp accepted prod")
	}
}

func TestBusFactor(t *testing.T) {
	tests := []struct {
		k    Kind
		n    int
		want float64
	}{
		{AllGather, 2, 0.5}, {ReduceScatter, 4, 0.75}, {AllReduce, 2, 1}, {AllReduce, 8, 1.75},
		{Broadcast, 8, 1}, {AllGather, 1, 1}, {AllToAll, 4, 0.75},
	}
	for _, tt := range tests {
		if got := BusFactor(tt.k, tt.n); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("BusFactor(%v, %d) = %v, want %v", tt.k, tt.n, got, tt.want)
		}
	}
}

func TestPathString(t *testing.T) {
	p := Path{Algo: AlgoDirect, Staged: true, Reason: "input not in the pool"}
	if got, want := p.String(), "direct+staged (input not in the pool)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestFormatSize(t *testing.T) {
	for _, c := range []struct {
		b    int64
		want string
	}{{0, "0"}, {1000, "1000"}, {1024, "1K"}, {1536, "1536"}, {64 << 20, "64M"}, {3 << 30, "3G"}, {1<<30 + 1<<20, "1025M"}} {
		if got := FormatSize(c.b); got != c.want {
			t.Errorf("FormatSize(%d) = %q, want %q", c.b, got, c.want)
		}
	}
}

// TestABICodes: the C ABI's algorithm and path codes (include/symmem.h)
// stay what they are: append to coll's list, never reorder it.
func TestABICodes(t *testing.T) {
	algos := []Algo{AlgoAuto, AlgoDirect, AlgoNCCL, AlgoNCCLWindow, AlgoCE, AlgoKernel, AlgoTwoShot, AlgoLowContention, AlgoLL, AlgoHier}
	if got := Algos(); !slices.Equal(got[:len(algos)], algos) {
		t.Errorf("algorithm codes %v, want %v first", got, algos)
	}
	paths := map[Algo]int{AlgoDirect: 0, AlgoNCCL: 1, AlgoNCCLWindow: 2, AlgoCE: 3, AlgoKernel: 4, AlgoTwoShot: 5, AlgoLowContention: 6, AlgoLL: 7, AlgoHier: 16}
	for a, want := range paths {
		if got, ok := PathCode(a); !ok || got != want {
			t.Errorf("PathCode(%s) = %d, %v; want %d", a, got, ok, want)
		}
	}
	if _, ok := PathCode(AlgoAuto); ok {
		t.Error("auto has a path code")
	}
	seen := map[int]Algo{}
	for _, a := range Algos()[1:] {
		c, _ := PathCode(a)
		if c&PathStaged != 0 || seen[c] != "" {
			t.Errorf("%s's path code %d has the staged bit or is %s's", a, c, seen[c])
		}
		seen[c] = a
	}
	for i, k := range []Kind{AllGather, ReduceScatter, AllReduce, Broadcast} {
		if int(k) != i || Kinds()[i] != k {
			t.Errorf("%v's code is %d, want %d", k, int(k), i)
		}
	}
}
