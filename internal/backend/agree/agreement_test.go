package agree

import "testing"

// TestAllKind: a disagreement says which kind of record every rank, not
// only the two it names, has at one position (0: they differ).
func TestAllKind(t *testing.T) {
	end := func(x uint64) Record { return Record{RecScopeEnd << 56, x} }
	world := func(x uint64) Record { return Record{RecWorld << 56, x} }
	call := Record{RecCall << 56, 1}
	for _, c := range []struct {
		recs []Record
		seqs []uint64
		want uint8
	}{
		{[]Record{end(1), end(2), end(1)}, nil, RecScopeEnd},
		{[]Record{end(1), end(2), call}, nil, 0},      // the third rank is in a collective
		{[]Record{end(1), end(2)}, []uint64{4, 5}, 0}, // another position
		{[]Record{end(1), end(2)}, []uint64{4, 4}, RecScopeEnd},
		{[]Record{world(1), world(2), world(1)}, nil, RecWorld},
		{[]Record{world(1), world(1), end(1)}, nil, 0},
		{[]Record{call, world(1)}, nil, 0},
	} {
		d := FirstDisagreement(c.recs, c.seqs)
		if d == nil || d.AllKind != c.want {
			t.Errorf("%v %v: %+v, want AllKind %d", c.recs, c.seqs, d, c.want)
		}
	}
}
