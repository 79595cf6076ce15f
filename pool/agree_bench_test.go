package pool

import (
	"context"
	"testing"

	"github.com/symmem/symmem/internal/backend/agree"
)

// agreeNop is a group of two whose in-band comparison always agrees at
// once: what remains is the pool's own work at Scope.End.
type agreeNop struct{ *member }

func (agreeNop) Agree(context.Context, agree.Record) error { return nil }
func (a agreeNop) Agreer() Agreer                          { return a }

// BenchmarkScopeEndInBand: OpenScope + End creating no segment, the pool's
// host work (record and bookkeeping) without the peers' signals.
func BenchmarkScopeEndInBand(b *testing.B) {
	p, _ := newTestPool(b, Options{MinSegment: 64 << 10})
	id, err := p.AddGroup(agreeNop{newGroup("world", 2)[0]}, 0)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	mustAlloc(b, p, 4096, 1)
	b.ReportAllocs()
	for b.Loop() {
		s, err := p.OpenScope(id)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.End(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
