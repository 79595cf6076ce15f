package pool

import "testing"

// TestAllScopeEnds: a disagreement says whether every rank, not only the
// two it names, is at a scope end at one position.
func TestAllScopeEnds(t *testing.T) {
	end := func(x uint64) Record { return Record{RecScopeEnd << 56, x} }
	call := Record{RecCall << 56, 1}
	for _, c := range []struct {
		recs []Record
		seqs []uint64
		want bool
	}{
		{[]Record{end(1), end(2), end(1)}, nil, true},
		{[]Record{end(1), end(2), call}, nil, false},      // the third rank is in a collective
		{[]Record{end(1), end(2)}, []uint64{4, 5}, false}, // another position
		{[]Record{end(1), end(2)}, []uint64{4, 4}, true},
	} {
		d := FirstDisagreement(c.recs, c.seqs)
		if d == nil || d.AllScopeEnds != c.want {
			t.Errorf("%v %v: %+v, want AllScopeEnds %t", c.recs, c.seqs, d, c.want)
		}
	}
}
