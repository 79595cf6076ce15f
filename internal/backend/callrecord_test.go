package backend

import (
	"fmt"
	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/pool"
)

// TestCallDiff: the first differing argument is named with both values, in
// the documented order; equal records and records that are not calls name
// nothing.
func TestCallDiff(t *testing.T) {
	call := func(k coll.Kind, dt coll.DType, op coll.ReduceOp, flags uint64) pool.Record {
		return pool.Record{pool.RecCall<<56 | uint64(k)<<48 | uint64(dt)<<40 | uint64(op)<<32 | flags, 0, 1024, 1<<48 | 0x1000, 1<<48 | 0x2000}
	}
	base := call(coll.AllReduce, coll.Float32, coll.Sum, 0)
	with := func(f func(*pool.Record)) pool.Record { r := base; f(&r); return r }
	tests := []struct {
		name   string
		a      pool.Record
		arg    string
		va, vb string
	}{
		{"kind", call(coll.AllGather, coll.BFloat16, coll.Sum, 0), "collective", coll.AllGather.String(), coll.AllReduce.String()},
		{"dtype before count", with(func(r *pool.Record) { r[0] = call(coll.AllReduce, coll.BFloat16, coll.Sum, 0)[0]; r[2] = 2048 }), "dtype", "bfloat16", "float32"},
		{"op", call(coll.AllReduce, coll.Float32, coll.Max, 0), "op", coll.Max.String(), coll.Sum.String()},
		{"root", with(func(r *pool.Record) { r[1] = 3 }), "root", "3", "0"},
		{"count", with(func(r *pool.Record) { r[2] = 256 }), "count", "256", "1024"},
		{"in-place", call(coll.AllReduce, coll.Float32, coll.Sum, CallInPlace), "in-place", "true", "false"},
		{"staged", call(coll.AllReduce, coll.Float32, coll.Sum, CallStaged), "staged (ordinary memory)", "true", "false"},
		{"in offset", with(func(r *pool.Record) { r[3] = 2<<48 | 0x40 }), "in offset", "segment 2 + 0x40", "segment 1 + 0x1000"},
		{"out offset", with(func(r *pool.Record) { r[4] = 1<<48 | 0x80 }), "out offset", "segment 1 + 0x80", "segment 1 + 0x2000"},
	}
	for _, tt := range tests {
		arg, va, vb, ok := CallDiff(tt.a, base)
		if !ok || arg != tt.arg || fmt.Sprint(va) != tt.va || fmt.Sprint(vb) != tt.vb {
			t.Errorf("%s: CallDiff = %q %v %v %v, want %q %s %s", tt.name, arg, va, vb, ok, tt.arg, tt.va, tt.vb)
		}
	}
	if _, _, _, ok := CallDiff(base, base); ok {
		t.Error("equal records: CallDiff named a difference")
	}
	if _, _, _, ok := CallDiff(pool.Record{pool.RecScopeEnd << 56}, base); ok {
		t.Error("a scope end against a call: CallDiff named an argument")
	}
}
