package tune

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/coll"
)

// row is a terse Row for tests: "all_reduce any 2 out 2M kernel" (size "-"
// for no bound).
func row(t *testing.T, s string) Row {
	t.Helper()
	f := strings.Fields(s)
	if len(f) != 6 {
		t.Fatalf("row %q: want 6 fields", s)
	}
	var r Row
	var err error
	if r.Op, err = coll.ParseKind(f[0]); err != nil {
		t.Fatal(err)
	}
	if r.Class, err = ParseClass(f[1]); err != nil {
		t.Fatal(err)
	}
	if r.Ranks, err = ParseRanks(f[2]); err != nil {
		t.Fatal(err)
	}
	if r.Place, err = ParsePlace(f[3]); err != nil {
		t.Fatal(err)
	}
	if f[4] != "-" {
		r.UpTo = parseBytes(t, f[4])
	}
	r.Algo = coll.Algo(f[5])
	return r
}

func parseBytes(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	var unit string
	fmt.Sscanf(s, "%d%s", &n, &unit)
	switch unit {
	case "K":
		n <<= 10
	case "M":
		n <<= 20
	case "G":
		n <<= 30
	}
	return n
}

func table(t *testing.T, rows ...string) *Table {
	t.Helper()
	tb := &Table{Format: FormatVersion, Machine: Machine{Backend: "cuda", GPU: "NVIDIA H200"}}
	for _, s := range rows {
		tb.Rows = append(tb.Rows, row(t, s))
	}
	return tb
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		rows []string
		want string // "" valid, else a substring of the error
	}{
		{"ok", []string{"all_reduce any 2 any 2M kernel", "all_reduce any 2 any - nccl"}, ""},
		{"one row", []string{"broadcast any 1- any - nccl"}, ""},
		{"disjoint classes", []string{"all_reduce 16-bit-float 2 any - kernel", "all_reduce other 2 any - nccl"}, ""},
		{"disjoint ranks", []string{"all_reduce any 2 any - kernel", "all_reduce any 3- any - nccl"}, ""},
		{"disjoint placements", []string{"all_gather any 2 in - kernel", "all_gather any 2 out - ce"}, ""},
		{"descending", []string{"all_reduce any 2 any 2M kernel", "all_reduce any 2 any 1M nccl"}, "row 1 (all_reduce any ranks 2 any up to 1M -> nccl): size bound not above the previous row's 2M"},
		{"after unbounded", []string{"all_reduce any 2 any - kernel", "all_reduce any 2 any - nccl"}, "row 1 "},
		{"auto", []string{"all_reduce any 2 any - auto"}, `row 0 (all_reduce any ranks 2 any no bound -> auto): path "auto"`},
		{"unknown path", []string{"all_reduce any 2 any - fast"}, `path "fast"`},
		{"overlap class", []string{"all_reduce any 2 any - kernel", "all_reduce 32-bit-float 2 any - nccl"}, "row 1 (all_reduce 32-bit-float ranks 2 any no bound -> nccl): overlaps row 0"},
		{"overlap ranks", []string{"all_reduce any 2-4 any - kernel", "all_reduce any 4- any - nccl"}, "overlaps row 0"},
		{"overlap place", []string{"all_gather any 2 any - kernel", "all_gather any 2 in - nccl"}, "overlaps row 0"},
		{"zero ranks", []string{}, "no rows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := table(t, tt.rows...).Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("valid table refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	tb := table(t, "all_reduce any 2 any - kernel")
	tb.Format = FormatVersion + 1
	if err := tb.Validate(); err == nil || !strings.Contains(err.Error(), "format version 2") {
		t.Errorf("a newer format: %v", err)
	}
}

func TestPick(t *testing.T) {
	tb := table(t,
		"all_gather any 2 out 16M kernel", "all_gather any 2 out - ce",
		"all_gather any 2 in 2M kernel", "all_gather any 2 in 8M nccl-window", "all_gather any 2 in - ce",
		"all_gather any 3-4 any 64M kernel", "all_gather any 3-4 any - ce",
		"all_reduce 16-bit-float 2 any 2M kernel", "all_reduce 16-bit-float 2 any - nccl",
		"all_reduce 32-bit-float 2 any 1M two-shot",
		"all_reduce any 5-8 any - nccl-window",
	)
	if err := tb.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		op      coll.Kind
		dt      coll.DType
		n       int
		inPlace bool
		total   int64
		want    coll.Algo // "" no row
	}{
		{coll.AllGather, coll.BFloat16, 2, false, 4 << 20, coll.AlgoKernel},
		{coll.AllGather, coll.BFloat16, 2, false, 16 << 20, coll.AlgoKernel}, // bounds are inclusive
		{coll.AllGather, coll.BFloat16, 2, false, 16<<20 + 1, coll.AlgoCE},
		{coll.AllGather, coll.Int8, 2, true, 4 << 20, coll.AlgoNCCLWindow},
		{coll.AllGather, coll.Float32, 4, true, 4 << 20, coll.AlgoKernel},
		{coll.AllGather, coll.Float32, 3, false, 1 << 30, coll.AlgoCE},
		{coll.AllGather, coll.Float32, 16, false, 1 << 10, coll.AlgoKernel},   // nearest below: 3-4
		{coll.AllGather, coll.Float32, 1, true, 4 << 20, coll.AlgoNCCLWindow}, // nearest above: 2
		{coll.AllReduce, coll.Float16, 2, true, 1 << 20, coll.AlgoKernel},
		{coll.AllReduce, coll.BFloat16, 2, false, 1 << 30, coll.AlgoNCCL},
		{coll.AllReduce, coll.Float32, 2, false, 1 << 20, coll.AlgoTwoShot},
		{coll.AllReduce, coll.Float32, 2, false, 2 << 20, ""}, // above its last bound
		{coll.AllReduce, coll.Float32, 6, false, 2 << 20, coll.AlgoNCCLWindow},
		{coll.AllReduce, coll.Float32, 4, false, 2 << 20, ""},                // nearest below 4 for f32: the 32-bit row (2), bounded
		{coll.AllReduce, coll.Int32, 2, false, 1 << 10, coll.AlgoNCCLWindow}, // only the any row covers int32: nearest above
		{coll.ReduceScatter, coll.Float32, 2, false, 1 << 10, ""},
		{coll.Broadcast, coll.Float32, 2, false, 1 << 10, ""},
	}
	for _, tt := range tests {
		got, ok := tb.Pick(tt.op, tt.dt, tt.n, tt.inPlace, false, tt.total)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("Pick(%v, %v, n=%d, in=%v, %d) = %q, %v; want %q", tt.op, tt.dt, tt.n, tt.inPlace, tt.total, got, ok, tt.want)
		}
	}
	var none *Table
	if _, ok := none.Pick(coll.AllReduce, coll.Float32, 2, false, false, 1); ok {
		t.Error("a nil table answered")
	}
	if n := testing.AllocsPerRun(100, func() { tb.Pick(coll.AllGather, coll.BFloat16, 4, true, true, 1<<20) }); n != 0 {
		t.Errorf("Pick allocates %v times", n)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	tb := table(t, "all_gather any 2 out 16M kernel", "all_gather any 2 out - ce", "broadcast other 3-4 in 1K nccl", "broadcast other 3-4 in - nccl-window",
		"all_reduce 16-bit-float 5- any - lc")
	tb.Date, tb.Command, tb.Sources = "2026-12-01", "symmem tune -o x.json", []string{"x.bfloat16.bench.json"}
	data, err := tb.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `{"op":"broadcast","dtype":"other","ranks":"3-4","placement":"in","up_to":1024,"algo":"nccl"}`) {
		t.Errorf("rows not one a line:\n%s", data)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if !slices.Equal(back.Rows, tb.Rows) || back.Date != tb.Date || back.Command != tb.Command || !slices.Equal(back.Sources, tb.Sources) || back.Machine != tb.Machine {
		t.Errorf("round trip:\n%+v\nwant\n%+v", back, tb)
	}
	for _, bad := range []struct{ json, want string }{
		{`{"format": 9, "rows": []}`, "format version 9: this symmem reads version 1"},
		{`{"format": 9, "rowz": []}`, "format version 9"},
		{`{"format": 1, "rows": [{"op":"all_reduce","dtype":"any","ranks":"2","placement":"sideways","algo":"nccl"}]}`, `placement "sideways"`},
		{`{"format": 1, "rows": [{"op":"all_reduce","dtype":"int","ranks":"2","placement":"in","algo":"nccl"}]}`, `dtype class "int"`},
		{`{"format": 1, "rows": [{"op":"all_reduce","dtype":"any","ranks":"0","placement":"in","algo":"nccl"}]}`, `ranks "0"`},
		{`{"format": 1, "rows": [{"op":"all_reduce","dtype":"any","ranks":"4-3","placement":"in","algo":"nccl"}]}`, `ranks "4-3"`},
		{`{"format": 1, "rows": [{"op":"all_reduce","dtype":"any","ranks":"2","placement":"in","algo":"auto"}]}`, `row 0`},
		{`{"format": 1, "extra": 1, "rows": []}`, `unknown field "extra"`},
	} {
		if _, err := Parse([]byte(bad.json)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Parse(%s): %v, want an error containing %q", bad.json, err, bad.want)
		}
	}
}

func TestBucket(t *testing.T) {
	for n, want := range map[int]string{1: "1", 2: "2", 3: "3-4", 4: "3-4", 5: "5-8", 8: "5-8", 9: "9-16", 72: "65-128"} {
		if got := Bucket(n).String(); got != want {
			t.Errorf("Bucket(%d) = %s, want %s", n, got, want)
		}
	}
}

// bench builds a bench report's JSON: rows "op algo bytes out_us in_us"
// ("-" for a refused placement, "x" for one with wrong elements).
func benchJSON(t *testing.T, ranks int, dtype string, rows ...string) []byte {
	t.Helper()
	type meas struct {
		TimeUs  float64 `json:"time_us"`
		Wrong   int64   `json:"wrong"`
		Refused string  `json:"refused,omitempty"`
	}
	type res struct {
		Op         string `json:"op"`
		Algo       string `json:"algo"`
		Bytes      int64  `json:"bytes"`
		OutOfPlace *meas  `json:"out_of_place,omitempty"`
		InPlace    *meas  `json:"in_place,omitempty"`
	}
	m := func(s string) *meas {
		switch s {
		case "-":
			return &meas{Refused: "refused"}
		case "x":
			return &meas{TimeUs: 0.001, Wrong: 3}
		}
		var v float64
		fmt.Sscan(s, &v)
		return &meas{TimeUs: v}
	}
	var rs []res
	for _, s := range rows {
		f := strings.Fields(s)
		rs = append(rs, res{Op: f[0], Algo: f[1], Bytes: parseBytes(t, f[2]), OutOfPlace: m(f[3]), InPlace: m(f[4])})
	}
	data, err := json.Marshal(map[string]any{"schema_version": 2, "backend": "cuda", "ranks": ranks, "dtype": dtype, "symmetric": true,
		"date": "2026-12-0" + fmt.Sprint(ranks), "machine": map[string]any{"gpu": "NVIDIA H100 80GB HBM3", "count": ranks, "link": "nvlink", "nccl": "2.28.9"},
		"results": rs})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func rowsString(rows []Row) string {
	var b strings.Builder
	for _, r := range rows {
		up := "-"
		if r.UpTo > 0 {
			up = coll.FormatSize(r.UpTo)
		}
		fmt.Fprintf(&b, "%v %s %s %s %s %s\n", r.Op, r.Class, r.Ranks, r.Place, up, r.Algo)
	}
	return b.String()
}

func TestBuild(t *testing.T) {
	in2, err := ReadInput("ar2.json", benchJSON(t, 2, "bfloat16",
		"all_reduce auto 1K 1 1", // ignored
		"all_reduce kernel 1K 10 10",
		"all_reduce nccl 1K 20 20",
		"all_reduce kernel 2K 10.2 30", // nccl-window 2% faster out of place: kernel wins the tie
		"all_reduce nccl-window 2K 10 10",
		"all_reduce kernel 4K - -",       // refused: nccl-window alone
		"all_reduce nccl-window 4K 12 x", // wrong in place: never wins
		"all_reduce nccl 4K 50 50",
		"all_reduce ce 8K 99 99",
		"all_reduce nccl 8K 40 40",
		"all_reduce nccl 16K 80 80",
	))
	if err != nil {
		t.Fatal(err)
	}
	in4, err := ReadInput("ar4.json", benchJSON(t, 4, "bfloat16", "all_reduce nccl 1K 1 1"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := Build([]Input{in2, in4})
	if err != nil {
		t.Fatal(err)
	}
	want := `all_reduce 16-bit-float 2 out 2K kernel
all_reduce 16-bit-float 2 out 4K nccl-window
all_reduce 16-bit-float 2 out - nccl
all_reduce 16-bit-float 2 in 1K kernel
all_reduce 16-bit-float 2 in 2K nccl-window
all_reduce 16-bit-float 2 in - nccl
all_reduce 16-bit-float 3-4 any - nccl
`
	if got := rowsString(rows); got != want {
		t.Errorf("rows:\n%s\nwant:\n%s", got, want)
	}

	// A seed fills what nothing measured: other classes, other rank
	// counts, other ops; the measured keys cut it.
	seed := table(t, "all_reduce any 2 any 1M kernel", "all_reduce any 2 any - nccl",
		"all_reduce any 3- any - nccl-window", "broadcast any 2- any - nccl")
	seed.Note = "transcribed"
	data, _ := seed.JSON()
	sin, err := ReadInput("seed.json", data)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := NewTable([]Input{in2, in4, sin}, "gen", []string{"ar2.json", "ar4.json", "seed.json"})
	if err != nil {
		t.Fatal(err)
	}
	want = `all_reduce 16-bit-float 2 out 2K kernel
all_reduce 16-bit-float 2 out 4K nccl-window
all_reduce 16-bit-float 2 out - nccl
all_reduce 16-bit-float 2 in 1K kernel
all_reduce 16-bit-float 2 in 2K nccl-window
all_reduce 16-bit-float 2 in - nccl
all_reduce 32-bit-float 2 any 1M kernel
all_reduce 32-bit-float 2 any - nccl
all_reduce other 2 any 1M kernel
all_reduce other 2 any - nccl
all_reduce 16-bit-float 3-4 any - nccl
all_reduce 32-bit-float 3- any - nccl-window
all_reduce other 3- any - nccl-window
all_reduce 16-bit-float 5- any - nccl-window
broadcast any 2- any - nccl
`
	if got := rowsString(tb.Rows); got != want {
		t.Errorf("rows with a seed:\n%s\nwant:\n%s", got, want)
	}
	m := tb.Machine
	if m.GPU != "NVIDIA H100 80GB HBM3 / NVIDIA H200" || m.Count != 4 || m.NCCL != "2.28.9" || tb.Date != "2026-12-04" ||
		!strings.Contains(tb.Note, "seed.json: transcribed") {
		t.Errorf("table header: %+v, date %s, note %q", m, tb.Date, tb.Note)
	}

	// Two rank counts of one bucket.
	in3, _ := ReadInput("ar3.json", benchJSON(t, 3, "bfloat16", "all_reduce nccl 1K 1 1"))
	if _, err := Build([]Input{in4, in3}); err == nil || !strings.Contains(err.Error(), "both stand for ranks 3-4") {
		t.Errorf("3 and 4 ranks: %v", err)
	}
}

func TestReadInputRefuses(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{`{"schema_version": 1, "ranks": 2, "dtype": "float", "symmetric": true}`, "bench schema version 1"},
		{`{"schema_version": 2, "ranks": 2, "dtype": "float", "symmetric": false}`, "ordinary buffers"},
		{`{"schema_version": 2, "ranks": 2, "dtype": "float", "symmetric": true, "offset": 4}`, "4 bytes past their aligned starts"},
		{`{"schema_version": 2, "ranks": 2, "dtype": "complex", "symmetric": true}`, `unknown dtype "complex"`},
		{`{"schema_version": 2, "ranks": 0, "dtype": "float", "symmetric": true}`, "the report says 0 ranks"},
		{`{"hello": 1}`, "neither a bench report"},
		{`[1]`, "x.json"},
	} {
		if _, err := ReadInput("x.json", []byte(c.json)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadInput(%s): %v, want %q", c.json, err, c.want)
		}
	}
}

func TestWinnerPreference(t *testing.T) {
	tests := []struct {
		times map[coll.Algo]float64
		prev  coll.Algo
		want  coll.Algo
	}{
		{map[coll.Algo]float64{coll.AlgoNCCL: 10, coll.AlgoCE: 10.29}, "", coll.AlgoCE},
		{map[coll.Algo]float64{coll.AlgoNCCL: 10, coll.AlgoCE: 10.31}, "", coll.AlgoNCCL},
		{map[coll.Algo]float64{coll.AlgoNCCL: 10, coll.AlgoNCCLWindow: 10.1, coll.AlgoKernel: 10.2}, "", coll.AlgoKernel},
		{map[coll.Algo]float64{coll.AlgoNCCL: 10, coll.AlgoNCCLWindow: 10.1}, "", coll.AlgoNCCLWindow},
		{map[coll.Algo]float64{coll.AlgoDirect: 10}, "", coll.AlgoDirect},
		{map[coll.Algo]float64{coll.AlgoDirect: 10, coll.AlgoNCCL: 10.2}, "", coll.AlgoNCCL},
		// The previous size's winner stays within Tie, not beyond it.
		{map[coll.Algo]float64{coll.AlgoNCCL: 10, coll.AlgoNCCLWindow: 10.2, coll.AlgoKernel: 10.1}, coll.AlgoNCCLWindow, coll.AlgoNCCLWindow},
		{map[coll.Algo]float64{coll.AlgoNCCL: 10, coll.AlgoNCCLWindow: 10.4, coll.AlgoKernel: 10.1}, coll.AlgoNCCLWindow, coll.AlgoKernel},
		{map[coll.Algo]float64{coll.AlgoNCCL: 10, coll.AlgoKernel: 10.1}, coll.AlgoCE, coll.AlgoKernel},
		// ll comes after ce and before the other kernels.
		{map[coll.Algo]float64{coll.AlgoKernel: 10, coll.AlgoLL: 10.2, coll.AlgoTwoShot: 10.1}, "", coll.AlgoLL},
		{map[coll.Algo]float64{coll.AlgoLL: 10, coll.AlgoCE: 10.2}, "", coll.AlgoCE},
		{map[coll.Algo]float64{coll.AlgoLL: 10, coll.AlgoKernel: 10.1}, coll.AlgoKernel, coll.AlgoKernel},
	}
	for _, tt := range tests {
		if got := winner(tt.times, tt.prev); got != tt.want {
			t.Errorf("winner(%v, prev %q) = %s, want %s", tt.times, tt.prev, got, tt.want)
		}
	}
}

// TestEveryPath: every path a table may name (coll.Algos but auto) has a Go
// name for GoSource, and every GPU path (all but the CPU's direct) a place
// in Preference.
func TestEveryPath(t *testing.T) {
	for _, a := range coll.Algos()[1:] {
		if _, ok := algoNames[a]; !ok {
			t.Errorf("algoNames has no Go name for %q", a)
		}
		if a != coll.AlgoDirect && !slices.Contains(Preference, a) {
			t.Errorf("Preference lacks %q", a)
		}
	}
}

func TestGoSource(t *testing.T) {
	tb := table(t, "all_gather any 2 out 16M kernel", "all_gather any 2 out - ce", "all_reduce 16-bit-float 3-4 in 512 ll",
		"all_reduce 16-bit-float 3-4 in 1536 two-shot")
	tb.Date, tb.Command, tb.Sources = "2026-12-01", "gen", []string{"results/auto/a.json"}
	src, err := GoSource(tb, "cuda", "builtinTable")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"// Code generated by internal/tune/gen from results/auto/; DO NOT EDIT.",
		"var builtinTable = tune.Must(&tune.Table{",
		"{Op: coll.AllGather, Class: tune.AnyClass, Ranks: tune.Ranks{Min: 2, Max: 2}, Place: tune.OutOfPlace, UpTo: 16 << 20, Algo: coll.AlgoKernel},",
		"UpTo: 512, Algo: coll.AlgoLL}",
		"UpTo: 1536, Algo: coll.AlgoTwoShot}",
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("source lacks %q:\n%s", want, src)
		}
	}
}

// TestReadsBenchJSON: what bench.WriteJSON writes is what ReadInput reads
// (the layout is mirrored here: the backends read this package, bench is
// above them).
func TestReadsBenchJSON(t *testing.T) {
	rep := &bench.Report{Schema: bench.SchemaVersion, Backend: "cuda", Ranks: 4, DType: bench.TypeName(coll.Float16), Symmetric: true,
		Date: "2026-12-01T00:00:00Z", Command: "symmem tune", Machine: &bench.Machine{GPU: "NVIDIA H100", Count: 8, Link: "nvlink", Driver: "12.8", NCCL: "2.28.9"},
		Results: []bench.Result{
			{Op: "all_gather", Algo: "ce", Bytes: 1 << 20, OutOfPlace: &bench.Measure{TimeUs: 7}, InPlace: &bench.Measure{Refused: "no"}},
			{Op: "all_gather", Algo: "auto", Bytes: 1 << 20, OutOfPlace: &bench.Measure{TimeUs: 6}},
			{Op: "all_gather", Algo: "kernel", Bytes: 1 << 20, OutOfPlace: &bench.Measure{TimeUs: 6, Wrong: 1}, InPlace: &bench.Measure{TimeUs: 5}},
			{Op: "all_reduce", Algo: "two-shot", Bytes: 1 << 20, OutOfPlace: &bench.Measure{TimeUs: 9}},
		}}
	var b strings.Builder
	if err := bench.WriteJSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	in, err := ReadInput("r.json", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	// An all-gather moves bytes: measured on one type, it stands for
	// every class; a reduction only for its own.
	var want []Measurement
	for _, c := range []Class{F16, F32, Other} {
		want = append(want, Measurement{Op: coll.AllGather, Class: c, Ranks: 4, Bytes: 1 << 20, Algo: coll.AlgoCE, TimeUs: 7})
	}
	for _, c := range []Class{F16, F32, Other} {
		want = append(want, Measurement{Op: coll.AllGather, Class: c, Ranks: 4, InPlace: true, Bytes: 1 << 20, Algo: coll.AlgoKernel, TimeUs: 5})
	}
	want = append(want, Measurement{Op: coll.AllReduce, Class: F16, Ranks: 4, Bytes: 1 << 20, Algo: coll.AlgoTwoShot, TimeUs: 9})
	if !slices.Equal(in.Measurements, want) {
		t.Errorf("measurements %+v, want %+v", in.Measurements, want)
	}
	if in.Machine != (Machine{Backend: "cuda", GPU: "NVIDIA H100", Count: 8, Link: "nvlink", Driver: "12.8", NCCL: "2.28.9"}) || in.Date != rep.Date {
		t.Errorf("machine %+v, date %s", in.Machine, in.Date)
	}
	if benchSchema != bench.SchemaVersion {
		t.Errorf("tune reads bench schema %d, bench writes %d: update benchReport", benchSchema, bench.SchemaVersion)
	}
}

// TestMergeMachines: each machine field lists every value once, also where
// an input (a seed table built from several machines) is joined already
// (it was appended whole: "A / A / B").
func TestMergeMachines(t *testing.T) {
	for _, tt := range []struct {
		in   []Machine
		want Machine
	}{
		{[]Machine{{Backend: "cuda", GPU: "A", Count: 2}, {Backend: "cuda", GPU: "A", Count: 4}}, Machine{Backend: "cuda", GPU: "A", Count: 4}},
		{[]Machine{{GPU: "A"}, {GPU: "B", NCCL: "2.28.9"}}, Machine{GPU: "A / B", NCCL: "2.28.9"}},
		{[]Machine{{GPU: "A"}, {GPU: "A / B"}}, Machine{GPU: "A / B"}},
		{[]Machine{{GPU: "A / B"}, {GPU: "B / A"}, {GPU: "C"}}, Machine{GPU: "A / B / C"}},
	} {
		if got := mergeMachines(tt.in); got != tt.want {
			t.Errorf("mergeMachines(%+v) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}
