package libnccl

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/errs"
)

func TestDataTypeOf(t *testing.T) {
	// Values are ncclDataType_t from nccl.h (2.28).
	want := map[coll.DType]DataType{
		coll.Int8: 0, coll.Uint8: 1, coll.Int32: 2, coll.Int64: 4,
		coll.Float16: 6, coll.Float32: 7, coll.Float64: 8, coll.BFloat16: 9,
	}
	for _, d := range coll.DTypes() {
		w, ok := want[d]
		if !ok {
			t.Fatalf("test table misses %v", d)
		}
		got, err := DataTypeOf(d)
		if err != nil || got != w {
			t.Errorf("DataTypeOf(%v) = %d, %v; want %d", d, got, err, w)
		}
	}
	if _, err := DataTypeOf(coll.DType(99)); err == nil {
		t.Error("DataTypeOf(99) succeeded")
	}
}

func TestRedOpOf(t *testing.T) {
	// ncclSum 0, ncclProd 1, ncclMax 2, ncclMin 3, ncclAvg 4.
	for _, c := range []struct {
		op   coll.ReduceOp
		want RedOp
	}{{coll.Sum, 0}, {coll.Avg, 4}, {coll.Min, 3}, {coll.Max, 2}} {
		got, err := RedOpOf(c.op)
		if err != nil || got != c.want {
			t.Errorf("RedOpOf(%v) = %d, %v; want %d", c.op, got, err, c.want)
		}
	}
	if _, err := RedOpOf(coll.ReduceOp(9)); err == nil {
		t.Error("RedOpOf(9) succeeded")
	}
}

func TestVersionString(t *testing.T) {
	for _, c := range []struct {
		v    int
		want string
	}{{22803, "2.28.3"}, {22809, "2.28.9"}, {22700, "2.27.0"}, {2804, "2.8.4"}, {0, "unknown"}, {-1, "unknown"}} {
		if got := VersionString(c.v); got != c.want {
			t.Errorf("VersionString(%d) = %q, want %q", c.v, got, c.want)
		}
	}
	if Version(2, 28, 3) != 22803 || Version(2, 8, 4) != 2804 || MinWindowVersion != 22700 {
		t.Error("Version encodes wrongly")
	}
}

func TestConfig(t *testing.T) {
	d := DefaultConfig()
	for i, v := range d.ints() {
		if v != Unset {
			t.Errorf("DefaultConfig field %d = %d, want INT_MIN", i, v)
		}
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	c := d
	c.Blocking, c.CTAPolicy, c.MinCTAs, c.MaxCTAs = 0, CTAPolicyZero, 2, 8
	ints := c.ints()
	if ints[0] != 0 || ints[2] != 2 || ints[3] != 8 || ints[7] != CTAPolicyZero {
		t.Errorf("ints order wrong: %v", ints)
	}
	bad := []func(*Config){
		func(c *Config) { c.Blocking = 2 },
		func(c *Config) { c.CTAPolicy = 7 },
		func(c *Config) { c.MinCTAs = -1 },
		func(c *Config) { c.MinCTAs, c.MaxCTAs = 9, 3 },
	}
	for i, f := range bad {
		c := DefaultConfig()
		f(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("bad config %d accepted", i)
		}
	}
}

// TestConfigRange: ncclConfig_t's fields are C ints: a value past int32
// wrapped silently (MaxCTAs 1<<32+4 reached NCCL as 4) and must be refused,
// naming the field.
func TestConfigRange(t *testing.T) {
	for _, c := range []struct {
		field string
		set   func(*Config)
	}{
		{"Blocking", func(c *Config) { c.Blocking = 1<<32 + 1 }},
		{"CGAClusterSize", func(c *Config) { c.CGAClusterSize = math.MaxInt32 + 1 }},
		{"MinCTAs", func(c *Config) { c.MinCTAs = 1 << 40 }},
		{"MaxCTAs", func(c *Config) { c.MaxCTAs = 1<<32 + 4 }},
		{"SplitShare", func(c *Config) { c.SplitShare = 1 << 32 }},
		{"TrafficClass", func(c *Config) { c.TrafficClass = math.MinInt32 - 1 }},
		{"CollnetEnable", func(c *Config) { c.CollnetEnable = math.MaxInt64 }},
		{"CTAPolicy", func(c *Config) { c.CTAPolicy = 1<<32 + CTAPolicyZero }},
		{"ShrinkShare", func(c *Config) { c.ShrinkShare = math.MinInt64 }},
		{"NVLSCTAs", func(c *Config) { c.NVLSCTAs = 1<<32 + 16 }},
		{"NChannelsPerNetPeer", func(c *Config) { c.NChannelsPerNetPeer = -1 << 33 }},
		{"NVLinkCentricSched", func(c *Config) { c.NVLinkCentricSched = 1<<31 + 1 }},
	} {
		cfg := DefaultConfig()
		c.set(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "config "+c.field+" = ") || !strings.Contains(err.Error(), "32-bit") {
			t.Errorf("%s out of int32 range: %v, want an error naming it", c.field, err)
		}
	}
	// The ends of the range are values (MinInt32 is Unset).
	cfg := DefaultConfig()
	cfg.SplitShare, cfg.TrafficClass = math.MaxInt32, math.MinInt32
	if err := cfg.Validate(); err != nil {
		t.Errorf("int32's ends: %v", err)
	}
}

func TestErrors(t *testing.T) {
	e := &Error{Call: "ncclAllGather", Code: int(InvalidArgument), Msg: "invalid argument (run with NCCL_DEBUG=WARN for details)"}
	if !strings.Contains(e.Error(), "ncclAllGather") || !strings.Contains(e.Error(), "ncclInvalidArgument") {
		t.Errorf("error text %q lacks call or code", e)
	}
	if IsInProgress(e) || !IsInProgress(&Error{Call: "x", Code: int(InProgress)}) {
		t.Error("IsInProgress wrong")
	}
	if IsInProgress(&Error{Call: "cuCtxSetCurrent", Code: int(InProgress), CUDA: true}) {
		t.Error("a CUDA error is never in progress")
	}
	if !errors.Is(notSupported("x"), errs.NotSupported) {
		t.Error("notSupported does not match errs.NotSupported")
	}
}
