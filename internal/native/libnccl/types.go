package libnccl

import (
	"errors"
	"fmt"
	"math"

	"github.com/symmem/symmem/internal/errs"

	"github.com/symmem/symmem/coll"
)

// ErrTimeout reports that a non-blocking NCCL operation did not finish
// before its deadline. The communicator should be aborted.
var ErrTimeout = errors.New("nccl: timed out")

// Result is ncclResult_t.
type Result int

// ncclResult_t values (nccl.h).
const (
	Success            Result = 0
	UnhandledCudaError Result = 1
	SystemError        Result = 2
	InternalError      Result = 3
	InvalidArgument    Result = 4
	InvalidUsage       Result = 5
	RemoteError        Result = 6
	InProgress         Result = 7
)

var resultNames = [...]string{"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError",
	"ncclInternalError", "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress"}

func (r Result) String() string {
	if r >= 0 && int(r) < len(resultNames) {
		return resultNames[r]
	}
	return fmt.Sprintf("ncclResult(%d)", int(r))
}

// Error is a failed NCCL or CUDA driver call.
type Error struct {
	Call   string // e.g. "ncclAllGather", "cuCtxSetCurrent"
	Code   int    // ncclResult_t, or CUresult when CUDA is true
	CUDA   bool   // the failing call was a CUDA driver call
	Msg    string // ncclGetErrorString (or the CUDA error name)
	Detail string // ncclGetLastError, when NCCL has more to say
}

func (e *Error) Error() string {
	var s string
	if e.CUDA {
		s = fmt.Sprintf("nccl: %s failed: CUDA error %d", e.Call, e.Code)
	} else {
		s = fmt.Sprintf("nccl: %s failed: %s (%d)", e.Call, Result(e.Code), e.Code)
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Result returns the NCCL result code (InternalError for CUDA failures).
func (e *Error) Result() Result {
	if e.CUDA {
		return UnhandledCudaError
	}
	return Result(e.Code)
}

// missingError is an absent library or symbol.
type missingError struct{ what string }

func (e *missingError) Error() string        { return "nccl: " + e.what }
func (e *missingError) Is(target error) bool { return target == errs.NotSupported }
func notSupported(format string, a ...any) error {
	return &missingError{what: fmt.Sprintf(format, a...)}
}

// VersionString formats ncclGetVersion's number: 22803 -> "2.28.3"
// (NCCL >= 2.9 encodes major*10000+minor*100+patch, older major*1000+minor*100+patch).
func VersionString(v int) string {
	if v <= 0 {
		return "unknown"
	}
	if v >= 20900 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/1000, v%1000/100, v%100)
}

// Version makes the number ncclGetVersion would report for major.minor.patch.
func Version(major, minor, patch int) int {
	if major > 2 || (major == 2 && minor >= 9) {
		return major*10000 + minor*100 + patch
	}
	return major*1000 + minor*100 + patch
}

// MinWindowVersion is the first NCCL release with ncclCommWindowRegister.
var MinWindowVersion = Version(2, 27, 0)

// DataType is ncclDataType_t.
type DataType int

// ncclDataType_t values (nccl.h, 2.28).
const (
	Int8     DataType = 0
	Uint8    DataType = 1
	Int32    DataType = 2
	Uint32   DataType = 3
	Int64    DataType = 4
	Uint64   DataType = 5
	Float16  DataType = 6
	Float32  DataType = 7
	Float64  DataType = 8
	BFloat16 DataType = 9
)

// RedOp is ncclRedOp_t.
type RedOp int

// ncclRedOp_t values (nccl.h).
const (
	OpSum  RedOp = 0
	OpProd RedOp = 1
	OpMax  RedOp = 2
	OpMin  RedOp = 3
	OpAvg  RedOp = 4
)

// DataTypeOf maps a symmem element type to NCCL's.
func DataTypeOf(d coll.DType) (DataType, error) {
	switch d {
	case coll.Float32:
		return Float32, nil
	case coll.Float64:
		return Float64, nil
	case coll.BFloat16:
		return BFloat16, nil
	case coll.Float16:
		return Float16, nil
	case coll.Int32:
		return Int32, nil
	case coll.Int64:
		return Int64, nil
	case coll.Int8:
		return Int8, nil
	case coll.Uint8:
		return Uint8, nil
	}
	return 0, fmt.Errorf("nccl: no NCCL data type for %v", d)
}

// RedOpOf maps a symmem reduction to NCCL's (Avg is ncclAvg, NCCL >= 2.10).
func RedOpOf(op coll.ReduceOp) (RedOp, error) {
	switch op {
	case coll.Sum:
		return OpSum, nil
	case coll.Avg:
		return OpAvg, nil
	case coll.Min:
		return OpMin, nil
	case coll.Max:
		return OpMax, nil
	}
	return 0, fmt.Errorf("nccl: no NCCL reduction for %v", op)
}

// CTA policies (ncclConfig_t.CTAPolicy, NCCL >= 2.27; ZERO >= 2.28).
const (
	CTAPolicyDefault    = 0
	CTAPolicyEfficiency = 1
	CTAPolicyZero       = 2
)

// Window flags for WindowRegister.
const (
	WinDefault       = 0
	WinCollSymmetric = 1
	// WinAlignment is NCCL_WIN_REQUIRED_ALIGNMENT.
	WinAlignment = 4096
)

// Unset marks an ncclConfig_t integer field NCCL should choose
// (NCCL_CONFIG_UNDEF_INT = INT_MIN).
const Unset = math.MinInt32

// Config mirrors the user fields of ncclConfig_t (NCCL 2.28 layout). Use
// DefaultConfig and change what you need: integer fields left at Unset and
// empty strings are NCCL's defaults.
type Config struct {
	Blocking            int // 1 blocking, 0 non-blocking
	CGAClusterSize      int
	MinCTAs             int
	MaxCTAs             int
	NetName             string
	SplitShare          int
	TrafficClass        int
	CommName            string
	CollnetEnable       int
	CTAPolicy           int
	ShrinkShare         int
	NVLSCTAs            int
	NChannelsPerNetPeer int
	NVLinkCentricSched  int
}

// DefaultConfig is NCCL_CONFIG_INITIALIZER: every field unset.
func DefaultConfig() Config {
	return Config{Blocking: Unset, CGAClusterSize: Unset, MinCTAs: Unset, MaxCTAs: Unset,
		SplitShare: Unset, TrafficClass: Unset, CollnetEnable: Unset, CTAPolicy: Unset,
		ShrinkShare: Unset, NVLSCTAs: Unset, NChannelsPerNetPeer: Unset, NVLinkCentricSched: Unset}
}

// configInt is one integer field of ncclConfig_t: its Go name and value.
type configInt struct {
	name string
	v    int
}

// intFields are the integer fields in ncclConfig_t order (netName and
// commName are passed separately): ints and Validate share the list.
func (c Config) intFields() [12]configInt {
	return [12]configInt{{"Blocking", c.Blocking}, {"CGAClusterSize", c.CGAClusterSize}, {"MinCTAs", c.MinCTAs}, {"MaxCTAs", c.MaxCTAs},
		{"SplitShare", c.SplitShare}, {"TrafficClass", c.TrafficClass}, {"CollnetEnable", c.CollnetEnable}, {"CTAPolicy", c.CTAPolicy},
		{"ShrinkShare", c.ShrinkShare}, {"NVLSCTAs", c.NVLSCTAs}, {"NChannelsPerNetPeer", c.NChannelsPerNetPeer}, {"NVLinkCentricSched", c.NVLinkCentricSched}}
}

// ints returns the integer fields in ncclConfig_t order, as C ints
// (Validate has checked they fit).
func (c Config) ints() [12]int32 {
	var out [12]int32
	for i, f := range c.intFields() {
		out[i] = int32(f.v)
	}
	return out
}

// Validate checks the fields NCCL would refuse, with a clearer message.
func (c Config) Validate() error {
	// ncclConfig_t's fields are C ints: a Go int past int32 would wrap
	// (MaxCTAs 1<<32+4 reaching NCCL as 4), so refuse it before the other
	// checks read a value NCCL would never see.
	for _, f := range c.intFields() {
		if f.v < math.MinInt32 || f.v > math.MaxInt32 {
			return fmt.Errorf("nccl: config %s = %d: out of range of ncclConfig_t's 32-bit int (%d to %d)", f.name, f.v, math.MinInt32, math.MaxInt32)
		}
	}
	if c.Blocking != Unset && c.Blocking != 0 && c.Blocking != 1 {
		return fmt.Errorf("nccl: config Blocking = %d: want 0, 1 or Unset", c.Blocking)
	}
	if c.CTAPolicy != Unset && (c.CTAPolicy < 0 || c.CTAPolicy > CTAPolicyZero) {
		return fmt.Errorf("nccl: config CTAPolicy = %d: want CTAPolicyDefault, CTAPolicyEfficiency, CTAPolicyZero or Unset", c.CTAPolicy)
	}
	for _, f := range []configInt{{"CGAClusterSize", c.CGAClusterSize}, {"MinCTAs", c.MinCTAs}, {"MaxCTAs", c.MaxCTAs}, {"NVLSCTAs", c.NVLSCTAs}} {
		if f.v != Unset && f.v < 0 {
			return fmt.Errorf("nccl: config %s = %d: want >= 0 or Unset", f.name, f.v)
		}
	}
	if c.MinCTAs != Unset && c.MaxCTAs != Unset && c.MinCTAs > c.MaxCTAs {
		return fmt.Errorf("nccl: config MinCTAs %d > MaxCTAs %d", c.MinCTAs, c.MaxCTAs)
	}
	return nil
}

// UniqueID is ncclUniqueId (NCCL_UNIQUE_ID_BYTES = 128).
type UniqueID [128]byte

// Comm is an ncclComm_t handle.
type Comm uintptr

// Window is an ncclWindow_t handle. Zero means NCCL accepted the
// registration but made no window (no symmetric support on this comm).
type Window uintptr
