package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
)

// TestAutoBestFill: auto's rows get the fastest other algorithm's time over
// auto's, per size and placement; refused rows and other ops do not count.
func TestAutoBestFill(t *testing.T) {
	m := func(us float64) *Measure { return &Measure{TimeUs: us, Path: "x"} }
	rs := []Result{
		{Op: "all_reduce", Algo: "auto", Bytes: 1024, OutOfPlace: m(10), InPlace: m(8)},
		{Op: "all_reduce", Algo: "auto", Bytes: 2048, OutOfPlace: m(20), InPlace: &Measure{Refused: "no"}},
		{Op: "all_reduce", Algo: "kernel", Bytes: 1024, OutOfPlace: m(9.5), InPlace: m(9)},
		{Op: "all_reduce", Algo: "kernel", Bytes: 2048, OutOfPlace: &Measure{Refused: "too big"}, InPlace: m(1)},
		{Op: "all_reduce", Algo: "nccl", Bytes: 1024, OutOfPlace: m(11), InPlace: m(7.9)},
		{Op: "all_gather", Algo: "nccl", Bytes: 2048, OutOfPlace: m(1), InPlace: m(1)},
	}
	fillAutoBest(rs)
	check := func(name string, got *Measure, ratio float64, algo string) {
		t.Helper()
		if math.Abs(got.AutoVsBest-ratio) > 1e-9 || got.BestAlgo != algo {
			t.Errorf("%s: auto/best %v (best %q), want %v (%q)", name, got.AutoVsBest, got.BestAlgo, ratio, algo)
		}
	}
	check("1K out", rs[0].OutOfPlace, 0.95, "kernel")
	check("1K in", rs[0].InPlace, 7.9/8, "nccl")
	check("2K out", rs[1].OutOfPlace, 0, "") // kernel refused, all_gather is another op
	check("2K in", rs[1].InPlace, 0, "")     // auto refused
	if rs[2].OutOfPlace.AutoVsBest != 0 {
		t.Error("a forced algorithm's row got auto/best")
	}
}

// TestAutoBestSweep: a sweep of auto beside another algorithm prints a
// "#" line per size after each op's last block, the same streamed as
// whole, puts auto/best in the JSON, and leaves nccl-tests' rows parsing.
func TestAutoBestSweep(t *testing.T) {
	cfg := baseConfig()
	cfg.Ops, cfg.Algos = []coll.Kind{coll.AllGather, coll.AllReduce}, []coll.Algo{coll.AlgoAuto, coll.AlgoKernel}
	cfg.Sizes = []int64{1 << 10, 4 << 10}
	var streamed bytes.Buffer
	table := NewTable(&streamed)
	cfg.OnRow = func(rep *Report, res Result) error { return table.Row(rep, res) }
	rep, err := runFake(2, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	table.Close(rep)
	var whole bytes.Buffer
	WriteTable(&whole, rep)
	if streamed.String() != whole.String() {
		t.Errorf("streamed table differs from the whole one:\n%s\n---\n%s", streamed.String(), whole.String())
	}
	out := whole.String()
	for _, op := range []string{"all_gather", "all_reduce"} {
		head := "# auto/best, " + op + ": "
		i := strings.Index(out, head)
		if i < 0 {
			t.Fatalf("no auto/best lines for %s:\n%s", op, out)
		}
		// After the op's kernel block, before the next op's first block.
		if j := strings.Index(out, "# "+op+", algo kernel"); j < 0 || j > i {
			t.Errorf("%s's auto/best lines come before its last block:\n%s", op, out)
		}
		lines := strings.Split(out[i:], "\n")
		for _, l := range lines[1:3] {
			if !strings.HasPrefix(l, "#   auto/best ") || !strings.Contains(l, "out-of-place ") || !strings.Contains(l, "in-place ") || !strings.Contains(l, "best kernel") {
				t.Errorf("auto/best line %q", l)
			}
		}
	}
	rows := 0
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if !ncclRow.MatchString(line) {
			t.Errorf("data line does not parse: %q", line)
		}
		rows++
	}
	if rows != 8 {
		t.Errorf("%d rows, want 8", rows)
	}
	var js bytes.Buffer
	WriteJSON(&js, rep)
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, r := range back.Results {
		got := r.OutOfPlace.AutoVsBest > 0 && r.OutOfPlace.BestAlgo == "kernel" && r.OutOfPlace.BestUs > 0
		if got != (r.Algo == "auto") {
			t.Errorf("%s %s %d: auto/best %v (best %q)", r.Op, r.Algo, r.Bytes, r.OutOfPlace.AutoVsBest, r.OutOfPlace.BestAlgo)
		}
	}
}
