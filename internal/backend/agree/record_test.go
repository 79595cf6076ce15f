package agree

import (
	"fmt"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
)

// TestDiff: the first differing argument is named with both values, in
// the documented order; equal records and records that are not calls name
// nothing.
func TestDiff(t *testing.T) {
	call := func(k coll.Kind, dt coll.DType, op coll.ReduceOp, flags uint64) Record {
		return Record{RecCall<<56 | uint64(k)<<48 | uint64(dt)<<40 | uint64(op)<<32 | flags, 0, 1024, 1<<48 | 0x1000, 1<<48 | 0x2000}
	}
	base := call(coll.AllReduce, coll.Float32, coll.Sum, 0)
	with := func(f func(*Record)) Record { r := base; f(&r); return r }
	tests := []struct {
		name   string
		a      Record
		arg    string
		va, vb string
	}{
		{"kind", call(coll.AllGather, coll.BFloat16, coll.Sum, 0), "collective", coll.AllGather.String(), coll.AllReduce.String()},
		{"dtype before count", with(func(r *Record) { r[0] = call(coll.AllReduce, coll.BFloat16, coll.Sum, 0)[0]; r[2] = 2048 }), "dtype", "bfloat16", "float32"},
		{"op", call(coll.AllReduce, coll.Float32, coll.Max, 0), "op", coll.Max.String(), coll.Sum.String()},
		{"root", with(func(r *Record) { r[1] = 3 }), "root", "3", "0"},
		{"count", with(func(r *Record) { r[2] = 256 }), "count", "256", "1024"},
		{"in-place", call(coll.AllReduce, coll.Float32, coll.Sum, InPlace), "in-place", "true", "false"},
		{"staged", call(coll.AllReduce, coll.Float32, coll.Sum, Staged), "staged (ordinary memory)", "true", "false"},
		{"in offset", with(func(r *Record) { r[3] = 2<<48 | 0x40 }), "in offset", "segment 2 + 0x40", "segment 1 + 0x1000"},
		{"out offset", with(func(r *Record) { r[4] = 1<<48 | 0x80 }), "out offset", "segment 1 + 0x80", "segment 1 + 0x2000"},
	}
	for _, tt := range tests {
		arg, va, vb, ok := Diff(tt.a, base)
		if !ok || arg != tt.arg || fmt.Sprint(va) != tt.va || fmt.Sprint(vb) != tt.vb {
			t.Errorf("%s: Diff = %q %v %v %v, want %q %s %s", tt.name, arg, va, vb, ok, tt.arg, tt.va, tt.vb)
		}
	}
	if _, _, _, ok := Diff(base, base); ok {
		t.Error("equal records: Diff named a difference")
	}
	if _, _, _, ok := Diff(Record{RecScopeEnd << 56}, base); ok {
		t.Error("a scope end against a call: Diff named an argument")
	}
}

// TestCallRecord: a record holds the locations that must agree, and leaves
// out those that are rank-dependent by construction or ordinary memory.
func TestCallRecord(t *testing.T) {
	in, out := Loc(1, 0x1000), Loc(2, 0x40)
	tests := []struct {
		name         string
		kind         coll.Kind
		flags        uint64
		wantIn, want uint64
	}{
		{"all-reduce", coll.AllReduce, 0, in, out},
		{"staged", coll.AllReduce, Staged, 0, 0},
		{"broadcast", coll.Broadcast, InPlace, 0, out},
		{"in-place all-gather", coll.AllGather, InPlace, 0, out},
		{"in-place reduce-scatter", coll.ReduceScatter, InPlace, in, 0},
	}
	for _, tt := range tests {
		r := CallRecord(tt.kind, coll.Float32, coll.Sum, 0, 64, tt.flags, in, out)
		if r.What() != RecCall || Kind(r) != tt.kind || r[2] != 64 || r[3] != tt.wantIn || r[4] != tt.want {
			t.Errorf("%s: record %x", tt.name, r)
		}
	}
	if Loc(3, 0x10) != 3<<48|0x10 {
		t.Errorf("Loc(3, 0x10) = %#x", Loc(3, 0x10))
	}
}

// TestExplain: one sentence per kind of difference, and the disagreements
// the user API names (positions, a scope end against a call).
func TestExplain(t *testing.T) {
	ar := CallRecord(coll.AllReduce, coll.Float32, coll.Sum, 0, 64, 0, Loc(1, 0), Loc(1, 0x100))
	bf := CallRecord(coll.AllReduce, coll.BFloat16, coll.Sum, 0, 64, 0, Loc(1, 0), Loc(1, 0x100))
	bc := CallRecord(coll.Broadcast, coll.Float32, 0, 0, 64, InPlace, 0, Loc(1, 0x100))
	tests := []struct {
		name string
		a, b Call
		want string
	}{
		{"argument", Call{Record: bf}, Call{Record: ar}, "rank 1 called all_reduce with dtype=bfloat16, rank 0 with dtype=float32 (every rank must pass the same"},
		{"collective", Call{Record: bc}, Call{Record: ar}, "rank 1 called broadcast, rank 0 all_reduce (every rank must make the same collectives"},
		{"path", Call{ar, coll.AlgoTwoShot}, Call{ar, coll.AlgoKernel}, "rank 1 ran it on two-shot, rank 0 on kernel"},
	}
	for _, tt := range tests {
		if got, ok := Explain(1, tt.a, 0, tt.b); !ok || !strings.HasPrefix(got, tt.want) {
			t.Errorf("%s: Explain = %q, %v; want %q...", tt.name, got, ok, tt.want)
		}
	}
	if got, ok := Explain(1, Call{ar, coll.AlgoKernel}, 0, Call{ar, coll.AlgoKernel}); ok {
		t.Errorf("equal calls: Explain = %q", got)
	}
	ranks := []int{4, 6}
	for _, tt := range []struct {
		d    Disagreement
		want string
	}{
		{Disagreement{Rank: 1, Theirs: bf, Rank0: ar}, "rank 6 called all_reduce with dtype=bfloat16, rank 4 with dtype=float32"},
		{Disagreement{Rank: 1, Theirs: ar, Rank0: ar, Seq: 3, Rank0Seq: 2}, "rank 6 is at another collective or scope end of the group than rank 4"},
		{Disagreement{Rank: 1, Theirs: Record{RecScopeEnd << 56}, Rank0: ar}, "rank 6 is ending a scope, rank 4 called all_reduce"},
	} {
		if got := tt.d.Explain(ranks); !strings.HasPrefix(got, tt.want) {
			t.Errorf("Explain = %q, want %q...", got, tt.want)
		}
	}
}

// TestDigest: the digest's values are pinned (the GPU programs carry
// them), and it covers the path; the store encoding round-trips.
func TestDigest(t *testing.T) {
	a := Record{RecCall<<56 | uint64(coll.AllReduce)<<48 | uint64(coll.Float32)<<40 | uint64(coll.Sum)<<32, 0, 1024, 1<<48 | 0x1000, 1<<48 | 0x2000}
	for _, tt := range []struct {
		c    Call
		want uint32
	}{{Call{Record: a}, 0xa61de1b5}, {Call{a, coll.AlgoTwoShot}, 0x4f24a76c}, {Call{}, 0x17598d3c}} {
		if got := Digest(tt.c); got != tt.want {
			t.Errorf("Digest(%x, %q) = %#08x, want %#08x", tt.c.Record, tt.c.Path, got, tt.want)
		}
	}
	for _, c := range []Call{{Record: a}, {a, coll.AlgoLowContention}} {
		b := c.Append(nil)
		if got, err := DecodeCall(b); err != nil || got != c || len(b) != RecordBytes+len(c.Path) {
			t.Errorf("DecodeCall(Append(%v)) = %v, %v", c, got, err)
		}
	}
	if _, err := DecodeCall(make([]byte, 47)); err == nil || err.Error() != "a record of 47 bytes" {
		t.Errorf("DecodeCall of 47 bytes: %v", err)
	}
	for _, p := range coll.Algos() {
		if PathOf(PathCode(p)) != p {
			t.Errorf("PathOf(PathCode(%q)) = %q", p, PathOf(PathCode(p)))
		}
	}
	if PathCode("nonsense") != 0 || PathOf(200) != "path 200" {
		t.Error("an unknown path")
	}
}
