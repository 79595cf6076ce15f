package nccl

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/libnccl"
)

func TestConfigNative(t *testing.T) {
	cases := []struct {
		name             string
		in               Config
		blocking, policy int
		min, max         int
		commName         string
	}{
		{"zero value", Config{}, 1, libnccl.Unset, libnccl.Unset, libnccl.Unset, "symmem:g"},
		{"non-blocking", Config{NonBlocking: true}, 0, libnccl.Unset, libnccl.Unset, libnccl.Unset, "symmem:g"},
		{"policy zero", Config{CTAPolicy: CTAPolicyZero}, 1, libnccl.CTAPolicyZero, libnccl.Unset, libnccl.Unset, "symmem:g"},
		{"policy efficiency, ctas", Config{CTAPolicy: CTAPolicyEfficiency, MinCTAs: 1, MaxCTAs: 4, Name: "x"}, 1, libnccl.CTAPolicyEfficiency, 1, 4, "x"},
		{"policy default", Config{CTAPolicy: CTAPolicyDefault}, 1, libnccl.CTAPolicyDefault, libnccl.Unset, libnccl.Unset, "symmem:g"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := c.in.native("g")
			if err != nil {
				t.Fatal(err)
			}
			if n.Blocking != c.blocking || n.CTAPolicy != c.policy || n.MinCTAs != c.min || n.MaxCTAs != c.max || n.CommName != c.commName {
				t.Errorf("got %+v", n)
			}
			if n.NVLSCTAs != libnccl.Unset || n.SplitShare != libnccl.Unset {
				t.Errorf("untouched fields must stay unset: %+v", n)
			}
		})
	}
	for _, bad := range []Config{{CTAPolicy: 9}, {MinCTAs: -1}, {MaxCTAs: -2}, {MinCTAs: 8, MaxCTAs: 2}} {
		if _, err := bad.native("g"); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestOptionsCheck(t *testing.T) {
	st := newMemStore()
	good := Options{GroupName: "g", Rank: 1, Size: 2, Store: st, Timeout: time.Minute}
	cases := []struct {
		name string
		mut  func(*Options)
		want string
	}{
		{"ok", func(*Options) {}, ""},
		{"no group", func(o *Options) { o.GroupName = "" }, "GroupName"},
		{"size 0", func(o *Options) { o.Size = 0 }, "Size"},
		{"rank out", func(o *Options) { o.Rank = 2 }, "Rank"},
		{"rank neg", func(o *Options) { o.Rank = -1 }, "Rank"},
		{"no store", func(o *Options) { o.Store = nil }, "Store"},
		{"neg timeout", func(o *Options) { o.Timeout = -1 }, "Options.Timeout is -1ns"},
		{"no timeout", func(o *Options) { o.Timeout = 0 }, "Options.Timeout is 0s"}, // the caller's, never defaulted here
	}
	for _, c := range cases {
		o := good
		c.mut(&o)
		err := o.check()
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v", c.name, err)
		}
		if strings.Contains(c.want, "Timeout") && !errors.Is(err, errs.Invalid) {
			t.Errorf("%s: %v, want errs.Invalid", c.name, err)
		}
	}
}

func TestNewWithoutNCCL(t *testing.T) {
	old := load
	load = func() (*libnccl.Lib, error) { return libnccl.Open([]string{t.TempDir() + "/libnccl.so.2"}) }
	defer func() { load = old }()
	_, err := New(t.Context(), Options{Timeout: time.Minute, GroupName: "g", Rank: 0, Size: 1, Store: newMemStore()})
	if !errors.Is(err, errs.NotSupported) {
		t.Fatalf("New without NCCL: %v, want errs.NotSupported", err)
	}
	if !strings.Contains(err.Error(), "libnccl.so.2") {
		t.Errorf("error %q does not say what was tried", err)
	}
}

func TestSpanCounts(t *testing.T) {
	sp := func(n int64) coll.Span { return coll.Span{Ptr: 1 << 20, Len: n} }
	cases := []struct {
		name    string
		req     backend.Request
		in, out int64
		bad     bool
	}{
		{"ag", backend.Request{Kind: coll.AllGather, DType: coll.BFloat16, Count: 3, In: sp(6), Out: sp(12)}, 6, 12, false},
		{"ag short out", backend.Request{Kind: coll.AllGather, DType: coll.BFloat16, Count: 3, In: sp(6), Out: sp(11)}, 0, 0, true},
		{"rs", backend.Request{Kind: coll.ReduceScatter, DType: coll.Float32, Count: 5, In: sp(40), Out: sp(20)}, 40, 20, false},
		{"rs short in", backend.Request{Kind: coll.ReduceScatter, DType: coll.Float32, Count: 5, In: sp(39), Out: sp(20)}, 0, 0, true},
		{"ar", backend.Request{Kind: coll.AllReduce, DType: coll.Int8, Count: 7, In: sp(7), Out: sp(7)}, 7, 7, false},
		{"bcast ignores in", backend.Request{Kind: coll.Broadcast, DType: coll.Int64, Count: 2, Out: sp(16)}, 16, 16, false},
		{"neg count", backend.Request{Kind: coll.AllReduce, DType: coll.Int8, Count: -1}, 0, 0, true},
		{"bad dtype", backend.Request{Kind: coll.AllReduce, DType: 42, Count: 1, In: sp(8), Out: sp(8)}, 0, 0, true},
		{"bad kind", backend.Request{Kind: 42, DType: coll.Int8, Count: 1, In: sp(8), Out: sp(8)}, 0, 0, true},
	}
	for _, c := range cases {
		in, out, err := spanCounts(c.req, 2)
		if (err != nil) != c.bad || in != c.in || out != c.out {
			t.Errorf("%s: %d %d %v", c.name, in, out, err)
		}
	}
}

func TestKeyPrefix(t *testing.T) {
	if a, b := keyPrefix("tp0", 1), keyPrefix("tp0", 2); a == b || !strings.Contains(a, "tp0") {
		t.Errorf("prefixes %q %q", a, b)
	}
}
