package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// OverlapReport is the outcome of RunOverlap, identical on every rank.
type OverlapReport struct {
	Schema   int           `json:"schema_version"` // SchemaVersion
	Kind     string        `json:"kind"`           // "overlap"
	Version  string        `json:"symmem_version,omitempty"`
	Args     []string      `json:"args,omitempty"`
	Backend  string        `json:"backend"`
	Ranks    int           `json:"ranks"`
	GEMM     GEMMShape     `json:"gemm"`  // bf16 inputs, f32 accumulation
	GEMMs    int           `json:"gemms"` // per trial
	GEMMMs   float64       `json:"gemm_ms_median"`
	TFlops   float64       `json:"gemm_tflops"` // of the GEMMs alone, per rank
	DType    string        `json:"dtype"`       // of the collectives
	Calls    int           `json:"calls"`       // collectives per trial
	Warmup   int           `json:"warmup"`
	Reps     int           `json:"reps"`
	Seed     uint64        `json:"seed"`
	Date     string        `json:"date"`
	Seconds  float64       `json:"seconds"`
	Command  string        `json:"command,omitempty"`
	Host     string        `json:"host,omitempty"`
	GEMMLib  string        `json:"gemm_library,omitempty"` // e.g. the cuBLAS path and version
	Cases    []OverlapCase `json:"cases"`
	FSDPRank int64         `json:"fsdp_bytes_per_rank,omitempty"`
	FSDPIter int           `json:"fsdp_iters,omitempty"`
	FSDP     []FSDPRow     `json:"fsdp,omitempty"`
}

// OverlapCase is one op of the main case: a row per algorithm.
type OverlapCase struct {
	Op    string       `json:"op"`
	Bytes int64        `json:"bytes"` // full tensor of one collective
	RedOp string       `json:"redop"`
	Rows  []OverlapRow `json:"rows"`
}

// OverlapRow is one algorithm of one case. Times are medians over the
// repetitions of the maximum over ranks, in milliseconds.
type OverlapRow struct {
	Algo     string  `json:"algo"` // requested
	Path     string  `json:"path"` // taken
	Reason   string  `json:"reason,omitempty"`
	Refused  string  `json:"refused,omitempty"`
	Wrong    int64   `json:"wrong"` // of the checked call, summed over ranks
	GEMMMs   float64 `json:"gemm_ms"`
	CommMs   float64 `json:"comm_ms"`
	BothMs   float64 `json:"together_ms"`
	GEMMInMs float64 `json:"gemm_together_ms"` // the GEMMs' own end in the together trial
	// Hidden is (GEMMMs + CommMs − BothMs) / CommMs: 1 when the collectives
	// cost nothing beside the GEMMs, 0 when the trial took as long as both
	// one after the other.
	Hidden float64 `json:"hidden"`
	// Slowdown is GEMMInMs / GEMMMs − 1: what the collectives cost the GEMMs.
	Slowdown float64 `json:"gemm_slowdown"`
	BusBW    float64 `json:"comm_busbw"` // of the collectives alone, GB/s
	Raw      RawReps `json:"raw"`
}

// RawReps keeps every repetition (maximum over ranks), in milliseconds.
type RawReps struct {
	GEMM   []float64 `json:"gemm_ms"`
	Comm   []float64 `json:"comm_ms"`
	Both   []float64 `json:"together_ms"`
	GEMMIn []float64 `json:"gemm_together_ms"`
}

// FSDPRow is one algorithm of the FSDP case, per iteration, in milliseconds.
type FSDPRow struct {
	Algo       string  `json:"algo"`
	Path       string  `json:"path"`
	Refused    string  `json:"refused,omitempty"`
	Wrong      int64   `json:"wrong"`
	GEMMMs     float64 `json:"gemm_ms"`
	CommMs     float64 `json:"comm_ms"`
	Sequential float64 `json:"sequential_ms"`
	Overlapped float64 `json:"overlapped_ms"`
	Speedup    float64 `json:"speedup"` // Sequential / Overlapped
	Hidden     float64 `json:"hidden"`  // (Sequential − Overlapped) / CommMs
}

func (row OverlapRow) summary() string {
	if row.Refused != "" {
		return "refused: " + row.Refused
	}
	return fmt.Sprintf("path %s, gemm %.2f ms, comm %.2f ms, together %.2f ms, hidden %.1f%%, gemm slowdown %.1f%%, #wrong %d",
		row.Path, row.GEMMMs, row.CommMs, row.BothMs, 100*row.Hidden, 100*row.Slowdown, row.Wrong)
}

func (row FSDPRow) summary() string {
	if row.Refused != "" {
		return "refused: " + row.Refused
	}
	return fmt.Sprintf("path %s, per iteration: sequential %.3f ms, overlapped %.3f ms (%.2fx), #wrong %d",
		row.Path, row.Sequential, row.Overlapped, row.Speedup, row.Wrong)
}

// WrongTotal sums #wrong over every row.
func (r *OverlapReport) WrongTotal() int64 {
	var n int64
	for _, c := range r.Cases {
		for _, row := range c.Rows {
			n += row.Wrong
		}
	}
	for _, row := range r.FSDP {
		n += row.Wrong
	}
	return n
}

// WriteOverlapTable writes rep as text: a header saying what ran, one row
// per algorithm (main case), then the FSDP case's rows.
func WriteOverlapTable(w io.Writer, rep *OverlapReport) error {
	var b strings.Builder
	g := rep.GEMM
	fmt.Fprintf(&b, "# symmem bench overlap: backend %s, %d ranks; %s\n", rep.Backend, rep.Ranks, rep.Date)
	if rep.Command != "" {
		fmt.Fprintf(&b, "# command: %s\n", rep.Command)
	}
	if rep.Host != "" {
		fmt.Fprintf(&b, "# host: %s\n", rep.Host)
	}
	if rep.GEMMLib != "" {
		fmt.Fprintf(&b, "# GEMMs: %s\n", rep.GEMMLib)
	}
	fmt.Fprintf(&b, "# compute stream: %d bf16 GEMMs %dx%dx%d (f32 accumulate; alone %.2f ms = %.0f TFLOP/s per rank)\n",
		rep.GEMMs, g.M, g.N, g.K, rep.GEMMMs, rep.TFlops)
	fmt.Fprintf(&b, "# comm stream:    %d collectives per trial, %s (size = full tensor)\n", rep.Calls, rep.DType)
	fmt.Fprintf(&b, "# times: ms from a common device-side start (CUDA events), max over ranks, median of %d (after %d warm-up)\n", rep.Reps, rep.Warmup)
	fmt.Fprintf(&b, "# hidden = (gemm + comm - together) / comm; gemm_slow = gemm_in / gemm - 1 (gemm_in: the GEMMs' end in the together run)\n")
	for _, c := range rep.Cases {
		op := c.Op
		if c.RedOp != "none" {
			op += " " + c.RedOp
		}
		fmt.Fprintf(&b, "#\n# %s %s\n# %-12s %-12s %9s %9s %11s %9s %8s %10s %10s %6s\n", op, FormatSize(c.Bytes),
			"algo", "path", "gemm_ms", "comm_ms", "together_ms", "gemm_in", "hidden", "gemm_slow", "comm_busbw", "#wrong")
		for _, row := range c.Rows {
			if row.Refused != "" {
				fmt.Fprintf(&b, "  %-12s %-12s %9s %9s %11s %9s %8s %10s %10s %6s\n", row.Algo, "refused", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a")
				fmt.Fprintf(&b, "#   %s refused: %s\n", row.Algo, row.Refused)
				continue
			}
			fmt.Fprintf(&b, "  %-12s %-12s %9.2f %9.2f %11.2f %9.2f %7.1f%% %9.1f%% %10.1f %6d\n", row.Algo, row.Path,
				row.GEMMMs, row.CommMs, row.BothMs, row.GEMMInMs, 100*row.Hidden, 100*row.Slowdown, row.BusBW, row.Wrong)
		}
	}
	if len(rep.FSDP) > 0 {
		fmt.Fprintf(&b, "#\n# FSDP case (PyTorch #172714): per iteration one %s all_gather (%s per rank) beside one GEMM; %d iterations per trial\n",
			rep.DType, FormatSize(rep.FSDPRank), rep.FSDPIter)
		fmt.Fprintf(&b, "# ms per iteration; sequential: the all-gather after the GEMM; overlapped: both from the iteration's start\n")
		fmt.Fprintf(&b, "# %-12s %-12s %9s %9s %12s %12s %8s %8s %6s\n", "algo", "path", "gemm_ms", "comm_ms", "sequential", "overlapped", "speedup", "hidden", "#wrong")
		for _, row := range rep.FSDP {
			if row.Refused != "" {
				fmt.Fprintf(&b, "  %-12s %-12s %9s %9s %12s %12s %8s %8s %6s\n", row.Algo, "refused", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a")
				fmt.Fprintf(&b, "#   %s refused: %s\n", row.Algo, row.Refused)
				continue
			}
			fmt.Fprintf(&b, "  %-12s %-12s %9.3f %9.3f %12.3f %12.3f %7.2fx %7.1f%% %6d\n", row.Algo, row.Path,
				row.GEMMMs, row.CommMs, row.Sequential, row.Overlapped, row.Speedup, 100*row.Hidden, row.Wrong)
		}
	}
	fmt.Fprintf(&b, "# Out of bounds values : %d %s\n", rep.WrongTotal(), okFailed(rep.WrongTotal() == 0))
	_, err := io.WriteString(w, b.String())
	return err
}

func okFailed(ok bool) string {
	if ok {
		return "OK"
	}
	return "FAILED"
}

// WriteOverlapJSON writes rep as indented JSON.
func WriteOverlapJSON(w io.Writer, rep *OverlapReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
