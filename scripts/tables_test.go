// Package scripts_test checks the table scripts of this folder (Python,
// standard library) on small fixtures, where python3 is at hand.
package scripts_test

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func python(t *testing.T, args ...string) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	out, err := exec.Command(py, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return string(out)
}

// row is the line of out that starts with the given fields.
func row(t *testing.T, out string, fields ...string) []string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= len(fields) && strings.Join(f[:len(fields)], " ") == strings.Join(fields, " ") {
			return f
		}
	}
	t.Fatalf("no row %q in:\n%s", fields, out)
	return nil
}

// TestBenchSide: ratios of the reference path to the fastest other path
// (auto and wrong results excluded), to NCCL window and to NCCL; none for a
// size where the reference was wrong or refused.
func TestBenchSide(t *testing.T) {
	out := python(t, "bench-side.py", "--ref", "ll", "testdata/bench-side.json")
	for _, c := range []struct {
		size string
		want []string // ll/best, ll/win, ll/nccl: the last three fields
	}{
		{"1024", []string{"0.62", "0.50", "0.62"}},
		{"4096", []string{"-", "-", "-"}},   // ll wrong
		{"262144", []string{"-", "-", "-"}}, // ll refused
	} {
		f := row(t, out, c.size)
		if got := f[len(f)-3:]; strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s bytes: ratios %v, want %v\n%s", c.size, got, c.want, out)
		}
	}
	if f := row(t, out, "4096"); f[1] != "WRONG2" {
		t.Errorf("4096 bytes: ll shows %s, want WRONG2", f[1])
	}
}

// TestHostcostTable: each round's and rank's line counted once, ratios to
// the first build, a small p where the builds differ and 1 where they are
// the same.
func TestHostcostTable(t *testing.T) {
	out := python(t, "hostcost-table.py", "testdata/hostcost.log", "A", "B", "C")
	for _, c := range []struct {
		build, n, median, ratio string
		pSmall                  bool
	}{
		{"B", "12", "9.10", "1.492", true},
		{"C", "12", "6.10", "1.000", false},
	} {
		f := row(t, out, c.build, "65536", "kernel")
		if f[3] != c.n || f[4] != c.median || f[7] != c.ratio {
			t.Errorf("build %s: n %s median %s ratio %s, want %s %s %s\n%s", c.build, f[3], f[4], f[7], c.n, c.median, c.ratio, out)
		}
		p, err := strconv.ParseFloat(f[8], 64)
		if err != nil || (p < 0.05) != c.pSmall {
			t.Errorf("build %s: p %s, want small %v", c.build, f[8], c.pSmall)
		}
	}
}

// TestABTable: one row per op and algorithm of a bench that runs several
// (the bench's section lines), graph benches apart, rank 0's rows only, a
// refused row leaves its cell empty, and a slowdown in every round is
// marked.
func TestABTable(t *testing.T) {
	out := python(t, "ab-table.py", "testdata/ab.log", "A", "B")
	for _, c := range []struct {
		fields []string
		end    string // how the row ends: the ratio, and its mark
	}{
		{[]string{"all_gather", "|", "ll", "|", "1024"}, "| 0.500"},
		{[]string{"all_gather", "|", "ll", "|", "4096"}, "| 1.000"},
		{[]string{"all_reduce", "|", "ll", "|", "1024"}, "| 1.500 slower each round"},
		{[]string{"all_reduce", "|", "ll", "|", "4096"}, "| -"},
		{[]string{"all_gather", "-G", "|", "kernel", "|", "1024"}, "| 1.100 slower each round"},
		{[]string{"reduce_scatter", "|", "kernel", "|", "1048576"}, "| 0.750"}, // --inplace no: out-of-place columns only
	} {
		if f := strings.Join(row(t, out, c.fields...), " "); !strings.HasSuffix(f, c.end) {
			t.Errorf("%v: row %q, want it to end %q\n%s", c.fields, f, c.end, out)
		}
	}
	if strings.Contains(out, "99") {
		t.Errorf("rank 1's row counted:\n%s", out)
	}
}
