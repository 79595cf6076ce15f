package pool

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The treap against a sorted-slice model: same membership and in-order walk.
func TestFreeTreeMatchesSortedModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var tr freeTree
	var model []freeKey
	cmp := func(a, b freeKey) int {
		switch {
		case a.less(b):
			return -1
		case b.less(a):
			return 1
		}
		return 0
	}
	for i := range 20000 {
		k := freeKey{size: 256 * (1 + rng.Int64N(20)), id: SegmentID(1 + rng.IntN(5)), off: 256 * rng.Int64N(50)}
		j, found := slices.BinarySearchFunc(model, k, cmp)
		if rng.IntN(2) == 0 && !found {
			tr.insert(k)
			model = slices.Insert(model, j, k)
		} else if got := tr.remove(k); got != found {
			t.Fatalf("op %d: remove(%+v) = %v, model has it: %v", i, k, got, found)
		} else if found {
			model = slices.Delete(model, j, j+1)
		}
		if tr.n != len(model) {
			t.Fatalf("op %d: size %d, model %d", i, tr.n, len(model))
		}
		if i%1000 == 0 {
			var walk []freeKey
			for k, ok := tr.ceil(freeKey{}); ok; k, ok = tr.next(k) {
				walk = append(walk, k)
			}
			if !slices.Equal(walk, model) {
				t.Fatalf("op %d: in-order walk differs from the model", i)
			}
		}
	}
	q := freeKey{size: 1000}
	j, _ := slices.BinarySearchFunc(model, q, cmp)
	if k, ok := tr.ceil(q); !ok || k != model[j] {
		t.Fatalf("ceil(%+v) = %+v, want %+v", q, k, model[j])
	}
}
