package backend

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/rendezvous"
)

func TestGroupConfigIndex(t *testing.T) {
	st := &rendezvous.Client{}
	tests := []struct {
		name  string
		cfg   GroupConfig
		want  int
		error string
	}{
		{"member", GroupConfig{Name: "tp", Ranks: []int{0, 2, 5}, Rank: 5, Store: st, Timeout: time.Second}, 2, ""},
		{"world of one", GroupConfig{Name: "w", Ranks: []int{0}, Rank: 0, Store: st, Timeout: time.Second}, 0, ""},
		{"not a member", GroupConfig{Name: "tp", Ranks: []int{0, 2}, Rank: 1, Store: st}, -1, "rank 1 is not a member"},
		{"unsorted", GroupConfig{Name: "tp", Ranks: []int{2, 0}, Rank: 0, Store: st}, -1, "ascending without repeats"},
		{"repeat", GroupConfig{Name: "tp", Ranks: []int{0, 0}, Rank: 0, Store: st}, -1, "ascending without repeats"},
		{"no store", GroupConfig{Name: "tp", Ranks: []int{0, 1}, Rank: 0}, -1, "Store is nil"},
	}
	for _, tt := range tests {
		got, err := tt.cfg.Index()
		if got != tt.want || (tt.error == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.error)) {
			t.Errorf("%s: Index() = %d, %v; want %d, error containing %q", tt.name, got, err, tt.want, tt.error)
		}
	}
}

// TestGroupConfigTimeout: the backends take the user API's timeout as it
// is (Init defaulted it) and refuse one that bounds nothing, naming the
// field.
func TestGroupConfigTimeout(t *testing.T) {
	for _, tt := range []struct {
		timeout time.Duration
		ok      bool
	}{{0, false}, {-time.Second, false}, {time.Nanosecond, true}, {time.Minute, true}} {
		cfg := GroupConfig{Name: "tp", Ranks: []int{0, 1}, Rank: 1, Store: &rendezvous.Client{}, Timeout: tt.timeout}
		_, err := cfg.Index()
		if tt.ok {
			if err != nil {
				t.Errorf("Timeout %v: %v", tt.timeout, err)
			}
			continue
		}
		if !errors.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "GroupConfig.Timeout is "+tt.timeout.String()) {
			t.Errorf("Timeout %v: %v, want errs.Invalid naming GroupConfig.Timeout", tt.timeout, err)
		}
	}
}

func TestShaped(t *testing.T) {
	sp := func(p uint64, n int64) coll.Span { return coll.Span{Ptr: p, Len: n} }
	for _, c := range []struct {
		name          string
		req           Request
		n, rank       int
		inLen, outLen int64
		inPlace       bool
	}{
		{"ag out-of-place", Request{Kind: coll.AllGather, DType: coll.Float32, Count: 4, In: sp(0x1000, 99), Out: sp(0x2000, 99)}, 2, 1, 16, 32, false},
		{"ag in-place rank 1", Request{Kind: coll.AllGather, DType: coll.Float32, Count: 4, In: sp(0x2010, 16), Out: sp(0x2000, 32)}, 2, 1, 16, 32, true},
		{"ag rank 0's slice passed by rank 1", Request{Kind: coll.AllGather, DType: coll.Float32, Count: 4, In: sp(0x2000, 16), Out: sp(0x2000, 32)}, 2, 1, 16, 32, false},
		{"rs in-place rank 2", Request{Kind: coll.ReduceScatter, DType: coll.BFloat16, Count: 8, In: sp(0x4000, 48), Out: sp(0x4020, 16)}, 3, 2, 48, 16, true},
		{"ar in-place", Request{Kind: coll.AllReduce, DType: coll.Int8, Count: 5, In: sp(0x10, 5), Out: sp(0x10, 5)}, 4, 0, 5, 5, true},
		{"ar out-of-place", Request{Kind: coll.AllReduce, DType: coll.Int8, Count: 5, In: sp(0x10, 5), Out: sp(0x20, 5)}, 4, 0, 5, 5, false},
		{"broadcast works in Out", Request{Kind: coll.Broadcast, DType: coll.Float64, Count: 2, In: sp(0x99, 1), Out: sp(0x40, 16)}, 2, 0, 16, 16, true},
	} {
		r := c.req.Shaped(c.n, c.rank)
		if r.In.Len != c.inLen || r.Out.Len != c.outLen || r.InPlace != c.inPlace {
			t.Errorf("%s: in %d out %d in-place %v, want %d %d %v", c.name, r.In.Len, r.Out.Len, r.InPlace, c.inLen, c.outLen, c.inPlace)
		}
	}
}

func TestCapabilitiesSupports(t *testing.T) {
	c := Capabilities{Algos: map[coll.Kind][]coll.Algo{coll.AllGather: {coll.AlgoCE}}}
	for _, x := range []struct {
		k    coll.Kind
		a    coll.Algo
		want bool
	}{{coll.AllGather, coll.AlgoAuto, true}, {coll.AllGather, "", true}, {coll.AllGather, coll.AlgoCE, true},
		{coll.AllReduce, coll.AlgoCE, false}, {coll.AllGather, coll.AlgoNCCL, false}} {
		if got := c.Supports(x.k, x.a); got != x.want {
			t.Errorf("Supports(%v, %q) = %v, want %v", x.k, x.a, got, x.want)
		}
	}
}
