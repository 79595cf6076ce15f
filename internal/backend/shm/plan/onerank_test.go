package plan

import (
	"testing"

	"github.com/symmem/symmem/coll"
)

// TestOneRank: every kind and variant builds a valid plan for a group of
// one rank (a local copy, or nothing in place).
func TestOneRank(t *testing.T) {
	for _, k := range []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.Broadcast} {
		for _, o := range []Options{{}, {InPlace: true}, {OneShot: true}, {InPlace: true, OneShot: true}, {Chunks: 4}} {
			if o.InPlace && k == coll.Broadcast || o.OneShot && k != coll.AllReduce {
				continue
			}
			for _, count := range []int64{0, 1, 1000} {
				p, err := Build(Spec{Kind: k, N: 1, Count: count, DType: coll.Float32, Op: coll.Sum, Options: o})
				if err != nil {
					t.Errorf("%v %+v count %d: %v", k, o, count, err)
					continue
				}
				if err := ValidateGroup([]Plan{p}); err != nil {
					t.Errorf("%v %+v count %d: %v", k, o, count, err)
				}
			}
		}
	}
}
