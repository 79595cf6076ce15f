// Package bench is symmem's nccl-tests-style benchmark harness. It owns the
// sweep (ops × algorithms × sizes × placements), the check of every result
// against a serial reference computed from seeded random data, the timing
// (maximum over ranks of the per-rank average; CUDA-graph replays with
// Config.Graph; p50/p99 of calls timed one by one), the memcpy baseline
// measured in the same run, and the reports: nccl-tests' output format
// (Table, written row by row as sizes complete, so parsers of nccl-tests
// output read it), versioned JSON, and plots drawn with gonum.org/v1/plot.
//
// RunOverlap is the overlap benchmark: GEMMs on one stream beside
// collectives on another (an Overlapper times both from a common device
// start), per algorithm, with the hidden fraction and the GEMM slowdown,
// and the FSDP-shaped case; WriteOverlapTable and WriteOverlapJSON report it.
//
// The harness is backend-neutral: it drives a Target, which one rank of a
// job implements (bench/worldtarget does, on a symmem.World of any
// backend). Every rank of the job calls Run with the same Config; each gets
// the same Report. Neither the user API nor any backend imports bench (the
// layering test, internal/layers, checks), so programs that use symmem do
// not link the harness or its PNG encoder.
package bench
