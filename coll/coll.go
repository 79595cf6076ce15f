// Package coll holds the vocabulary shared by the user API, plans and
// backends: data types, reduction operators, collective kinds, memory spans,
// algorithms and the paths a call can take. It has no behaviour beyond
// describing and validating these values.
package coll

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// DType is an element type.
type DType int

const (
	Float32 DType = iota
	Float64
	BFloat16
	Float16
	Int32
	Int64
	Int8
	Uint8
)

var dtypeInfo = [...]struct {
	name string
	size int
}{
	Float32:  {"float32", 4},
	Float64:  {"float64", 8},
	BFloat16: {"bfloat16", 2},
	Float16:  {"float16", 2},
	Int32:    {"int32", 4},
	Int64:    {"int64", 8},
	Int8:     {"int8", 1},
	Uint8:    {"uint8", 1},
}

// Size is the element size in bytes.
func (d DType) Size() int { return dtypeInfo[d].size }

func (d DType) String() string {
	if d < 0 || int(d) >= len(dtypeInfo) {
		return fmt.Sprintf("dtype(%d)", int(d))
	}
	return dtypeInfo[d].name
}

// Valid reports whether d is a known type.
func (d DType) Valid() bool { return d >= 0 && int(d) < len(dtypeInfo) }

// DTypes lists every type.
func DTypes() []DType {
	out := make([]DType, len(dtypeInfo))
	for i := range out {
		out[i] = DType(i)
	}
	return out
}

// ParseDType accepts the names String returns plus the usual short forms.
func ParseDType(s string) (DType, error) {
	alias := map[string]DType{"float": Float32, "fp32": Float32, "f32": Float32, "double": Float64,
		"fp64": Float64, "bf16": BFloat16, "fp16": Float16, "half": Float16, "f16": Float16,
		"int": Int32, "i32": Int32, "i64": Int64, "i8": Int8, "u8": Uint8}
	s = strings.ToLower(s)
	if d, ok := alias[s]; ok {
		return d, nil
	}
	for _, d := range DTypes() {
		if d.String() == s {
			return d, nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q (want one of float32, float64, bfloat16, float16, int32, int64, int8, uint8)", s)
}

// ReduceOp is a reduction operator.
type ReduceOp int

const (
	Sum ReduceOp = iota
	Avg
	Min
	Max
)

var redNames = [...]string{Sum: "sum", Avg: "avg", Min: "min", Max: "max"}

func (r ReduceOp) String() string {
	if r < 0 || int(r) >= len(redNames) {
		return fmt.Sprintf("redop(%d)", int(r))
	}
	return redNames[r]
}

// ParseReduceOp parses sum, avg, min or max.
func ParseReduceOp(s string) (ReduceOp, error) {
	for i, n := range redNames {
		if strings.EqualFold(n, s) {
			return ReduceOp(i), nil
		}
	}
	return 0, fmt.Errorf("unknown reduction %q (want sum, avg, min or max)", s)
}

// Kind is a collective operation.
type Kind int

const (
	AllGather Kind = iota
	ReduceScatter
	AllReduce
	Broadcast
	// AllToAll sends block j of every rank's input to rank j; rank i's
	// block of every output comes from rank i. Its forms (equal blocks,
	// host split counts, split counts in symmetric memory) share the kind.
	AllToAll
)

var kindNames = [...]string{AllGather: "all_gather", ReduceScatter: "reduce_scatter", AllReduce: "all_reduce", Broadcast: "broadcast", AllToAll: "all_to_all"}

// kindConsts are the kinds' constants as Go source names them.
var kindConsts = [...]string{AllGather: "AllGather", ReduceScatter: "ReduceScatter", AllReduce: "AllReduce", Broadcast: "Broadcast", AllToAll: "AllToAll"}

// Kinds lists every collective, in the order of their codes (the C ABI's
// symmem_kind): append only.
func Kinds() []Kind {
	out := make([]Kind, len(kindNames))
	for i := range out {
		out[i] = Kind(i)
	}
	return out
}

// Const is k's constant here as Go source names it ("AllGather").
func (k Kind) Const() string { return kindConsts[k] }

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("kind(%d)", int(k))
	}
	return kindNames[k]
}

// kindSpellings are the names ParseKind accepts besides a Kind's String
// (all_gather), in any case: the kebab and joined forms, and the short
// ones of --ops (ag,rs,ar,bc,a2a).
var kindSpellings = [...][]string{
	AllGather:     {"all-gather", "allgather", "ag"},
	ReduceScatter: {"reduce-scatter", "reducescatter", "rs"},
	AllReduce:     {"all-reduce", "allreduce", "ar"},
	Broadcast:     {"bc", "bcast"},
	AllToAll:      {"all-to-all", "alltoall", "a2a"},
}

// ParseKind accepts a Kind's name or one of its other spellings
// (kindSpellings), in any case. Only whole spellings: stripping every
// separator took "a-l-l-gather" or "allgather_" for all_gather.
func ParseKind(s string) (Kind, error) {
	for i, n := range kindNames {
		if strings.EqualFold(s, n) {
			return Kind(i), nil
		}
		for _, alt := range kindSpellings[i] {
			if strings.EqualFold(s, alt) {
				return Kind(i), nil
			}
		}
	}
	return 0, fmt.Errorf("unknown op %q: want %s", s, kindChoices)
}

// kindChoices lists the accepted names per op (ParseKind's error).
var kindChoices = func() string {
	var parts []string
	for i, n := range kindNames {
		parts = append(parts, n+" ("+strings.Join(kindSpellings[i], ", ")+")")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1] + ", in any case"
}()

// Span is a range of memory the backend can address: host memory for the
// CPU backend, device memory for CUDA. Ptr is an address, never a Go pointer.
type Span struct {
	Ptr uint64
	Len int64
}

// End is one past the last byte.
func (s Span) End() uint64 { return s.Ptr + uint64(s.Len) }

// Algo selects how a collective runs.
type Algo string

//go:generate go run ./internal/gencodes -root ..

const (
	AlgoAuto          Algo = "auto"        // pick per op and size
	AlgoDirect        Algo = "direct"      // CPU: peers read each other's symmetric memory
	AlgoNCCL          Algo = "nccl"        // plain NCCL on ordinary buffers
	AlgoNCCLWindow    Algo = "nccl-window" // NCCL on window-registered symmetric buffers
	AlgoCE            Algo = "ce"          // copy engines on peer-mapped symmetric buffers
	AlgoKernel        Algo = "kernel"      // symmem's own SM kernel on peer-mapped symmetric buffers
	AlgoTwoShot       Algo = "two-shot"    // all-reduce: symmem's reduce-scatter kernel, then its all-gather kernel, in place
	AlgoLowContention Algo = "lc"          // copy engines move, a few CTAs reduce (reduce-scatter; all-reduce adds a copy-engine all-gather)
	AlgoLL            Algo = "ll"          // symmem's low-latency kernel for small messages: data and flag in one store, no round trips; any device buffers
	AlgoHier          Algo = "hier"        // a group across hosts: symmem's paths within each host, NCCL between hosts
)

// AlgoInfo describes an algorithm for what is derived from algoList: the C
// header's and Python's codes (internal/gencodes writes them), Go source
// that names it, the order of ties between measured paths.
type AlgoInfo struct {
	Algo  Algo
	Const string // its constant here, as Go source names it ("AlgoNCCL")
	Doc   string // what SYMMEM_PATH_* of it says in include/symmem.h ("": auto, which is no path)
	// Tie is its place when measured paths tie (package tune's Preference:
	// 1 wins); 0: never among them (auto; the CPU's direct, alone on its
	// backend).
	Tie int
}

// algoList lists every algorithm. Its order is the C ABI's codes: the
// index is SYMMEM_ALGO_*, and the path code (PathCode) follows from it:
// append only. The ties go copy engines first (they use no SMs, which stay
// free for the compute beside the collective), then symmem's kernels (ll,
// the small-message kernel of one push; kernel; two-shot and lc, which a
// table names only where they measured fastest), then NCCL on windows,
// then plain NCCL, then hier (across hosts: NCCL alone is the simpler of
// two equals).
var algoList = [...]AlgoInfo{
	{AlgoAuto, "AlgoAuto", "", 0},
	{AlgoDirect, "AlgoDirect", "CPU: peers read each other's memory", 0},
	{AlgoNCCL, "AlgoNCCL", "plain NCCL", 7},
	{AlgoNCCLWindow, "AlgoNCCLWindow", "NCCL on registered windows", 6},
	{AlgoCE, "AlgoCE", "copy engines", 1},
	{AlgoKernel, "AlgoKernel", "symmem's own kernel", 3},
	{AlgoTwoShot, "AlgoTwoShot", "all-reduce: symmem's reduce-scatter kernel, then its all-gather kernel", 4},
	{AlgoLowContention, "AlgoLowContention", "low contention: copy engines move, a few CTAs reduce", 5},
	{AlgoLL, "AlgoLL", "low latency: symmem's small-message kernel, data and flag in one store", 2},
	{AlgoHier, "AlgoHier", "across hosts: symmem's paths within each host, NCCL between them", 8},
}

// AlgoTable lists every algorithm with what is derived from it, in code
// order.
func AlgoTable() []AlgoInfo { return slices.Clone(algoList[:]) }

// Algos lists every algorithm name, in the order of the C ABI's algorithm
// codes (SYMMEM_ALGO_* in include/symmem.h).
func Algos() []Algo {
	out := make([]Algo, len(algoList))
	for i, a := range algoList {
		out[i] = a.Algo
	}
	return out
}

// PathStaged is added to a path code where the caller's buffers were
// staged through the pool (SYMMEM_PATH_STAGED).
const PathStaged = 8

// PathCode is a's path code, what the C ABI's collectives return for it
// (SYMMEM_PATH_*): its algorithm code less one (auto is no path), past 7
// skipping every value with the staged bit. ok is false for auto and
// unknown names.
func PathCode(a Algo) (code int, ok bool) {
	for i := 1; i < len(algoList); i++ {
		if algoList[i].Algo == a {
			n := i - 1
			return n&^(PathStaged-1)<<1 | n&(PathStaged-1), true
		}
	}
	return 0, false
}

// Path reports what a call actually did and why, for bench output and doctor.
type Path struct {
	Algo   Algo
	Staged bool   // the caller's buffers were not symmetric and were staged through the pool
	Reason string // why this path was chosen
}

func (p Path) String() string {
	s := string(p.Algo)
	if p.Staged {
		s += "+staged"
	}
	if p.Reason != "" {
		s += " (" + p.Reason + ")"
	}
	return s
}

// BusFactor converts algbw to busbw with nccl-tests' definitions for n ranks.
func BusFactor(k Kind, n int) float64 {
	if n <= 1 {
		return 1
	}
	switch k {
	case AllReduce:
		return 2 * float64(n-1) / float64(n)
	case Broadcast:
		return 1
	default:
		return float64(n-1) / float64(n)
	}
}

// FormatSize writes a byte count as nccl-tests and symmem's CLI print it:
// with a K, M or G suffix where it is a whole multiple (64M, 1G), else in
// bytes.
func FormatSize(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return strconv.FormatInt(b>>30, 10) + "G"
	case b >= 1<<20 && b%(1<<20) == 0:
		return strconv.FormatInt(b>>20, 10) + "M"
	case b >= 1<<10 && b%(1<<10) == 0:
		return strconv.FormatInt(b>>10, 10) + "K"
	}
	return strconv.FormatInt(b, 10)
}
