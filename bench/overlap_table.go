package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

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
