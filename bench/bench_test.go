package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/errs"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{"1024", 1024, false}, {"1K", 1024, false}, {"1k", 1024, false}, {"64KiB", 64 << 10, false},
		{"256M", 256 << 20, false}, {"1G", 1 << 30, false}, {"8MB", 8 << 20, false}, {"12B", 12, false},
		{"", 0, true}, {"0", 0, true}, {"-1K", 0, true}, {"1.5M", 0, true}, {"12X", 0, true}, {"K", 0, true},
	} {
		got, err := ParseSize(c.in)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, bad=%v", c.in, got, err, c.want, c.bad)
		}
		if err != nil && !strings.Contains(err.Error(), "want a positive byte count") {
			t.Errorf("ParseSize(%q) error %q does not say what to do", c.in, err)
		}
	}
}

func TestSizes(t *testing.T) {
	for _, c := range []struct {
		b, e int64
		f    int
		want []int64
		bad  bool
	}{
		{1 << 10, 1 << 14, 2, []int64{1 << 10, 1 << 11, 1 << 12, 1 << 13, 1 << 14}, false},
		{1 << 10, 1 << 15, 4, []int64{1 << 10, 1 << 12, 1 << 14}, false},
		{1 << 20, 1 << 20, 2, []int64{1 << 20}, false},
		{1 << 20, 1 << 20, 1, []int64{1 << 20}, false},
		{1 << 10, 1 << 28, 2, nil, false}, // checked by length below
		{1 << 20, 1 << 10, 2, nil, true},
		{1 << 10, 1 << 20, 1, nil, true},
		{0, 1 << 20, 2, nil, true},
	} {
		got, err := Sizes(c.b, c.e, c.f)
		if (err != nil) != c.bad {
			t.Errorf("Sizes(%d,%d,%d) error %v, want bad=%v", c.b, c.e, c.f, err, c.bad)
			continue
		}
		if c.want == nil && !c.bad {
			if len(got) != 19 || got[18] != 1<<28 {
				t.Errorf("default sweep has %d sizes ending %d", len(got), got[len(got)-1])
			}
			continue
		}
		if !c.bad && !equal(got, c.want) {
			t.Errorf("Sizes(%d,%d,%d) = %v, want %v", c.b, c.e, c.f, got, c.want)
		}
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLayout(t *testing.T) {
	for _, c := range []struct {
		k                                 coll.Kind
		size                              int64
		es, n                             int
		bytes, total, per, inB, outB, run int64
	}{
		{coll.AllGather, 1024, 4, 2, 1024, 256, 128, 512, 1024, 128},
		{coll.AllGather, 1024, 4, 3, 1020, 255, 85, 340, 1020, 85},
		{coll.ReduceScatter, 1024, 2, 2, 1024, 512, 256, 1024, 512, 256},
		{coll.AllReduce, 1000, 8, 3, 1000, 125, 125, 1000, 1000, 125},
		{coll.Broadcast, 4, 8, 2, 0, 0, 0, 0, 0, 0},
		{coll.AllGather, 4, 4, 2, 0, 0, 0, 0, 0, 0},
	} {
		l := layoutFor(c.k, c.size, c.es, c.n)
		want := layout{c.bytes, c.total, c.per, c.inB, c.outB, c.run}
		if l != want {
			t.Errorf("layoutFor(%v,%d,%d,%d) = %+v, want %+v", c.k, c.size, c.es, c.n, l, want)
		}
	}
}

func TestBandwidth(t *testing.T) {
	for _, c := range []struct {
		k        coll.Kind
		n        int
		bytes    int64
		us       float64
		alg, bus float64
	}{
		{coll.AllGather, 2, 1e9, 1e6, 1, 0.5},
		{coll.ReduceScatter, 4, 2e9, 1e6, 2, 1.5},
		{coll.AllReduce, 2, 1e9, 1e6, 1, 1},
		{coll.AllReduce, 8, 8e9, 2e6, 4, 7},
		{coll.Broadcast, 8, 3e9, 1e6, 3, 3},
		{coll.AllGather, 1, 1e9, 1e6, 1, 1},
		{coll.AllGather, 2, 1e9, 0, 0, 0},
	} {
		alg, bus := Bandwidth(c.k, c.n, c.bytes, c.us)
		if math.Abs(alg-c.alg) > 1e-12 || math.Abs(bus-c.bus) > 1e-12 {
			t.Errorf("Bandwidth(%v,%d,%d,%g) = %g,%g want %g,%g", c.k, c.n, c.bytes, c.us, alg, bus, c.alg, c.bus)
		}
	}
}

func TestHalfConversions(t *testing.T) {
	for _, c := range []struct {
		f float32
		h uint16
	}{{0, 0}, {1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {0.5, 0x3800}, {6.103515625e-05, 0x0400},
		{5.960464477539063e-08, 0x0001}, {1e6, 0x7c00}, {1.0009765625, 0x3c01}, {1.00048828125, 0x3c00}} {
		if got := f16FromFloat32(c.f); got != c.h {
			t.Errorf("f16FromFloat32(%g) = %#04x, want %#04x", c.f, got, c.h)
		}
		if c.h != 0x7c00 && c.f != 1.00048828125 {
			if got := f16ToFloat32(c.h); got != c.f {
				t.Errorf("f16ToFloat32(%#04x) = %g, want %g", c.h, got, c.f)
			}
		}
	}
	for v := int64(-300); v <= 300; v++ {
		for _, dt := range []coll.DType{coll.Float32, coll.Float64, coll.BFloat16, coll.Float16} {
			b := make([]byte, 8)
			encode(b, dt, v)
			if got := decodeFloat(b, dt); got != float64(v) && !(dt == coll.BFloat16 && math.Abs(v2f(v)) > 256) {
				t.Fatalf("%v round trip of %d gave %g", dt, v, got)
			}
		}
	}
}

func v2f(v int64) float64 { return float64(v) }

func TestFillBytesOffsets(t *testing.T) {
	whole := make([]byte, 100)
	fillBytes(whole, 7, 0)
	for off := 0; off < 100; off++ {
		part := make([]byte, 100-off)
		fillBytes(part, 7, int64(off))
		if !bytes.Equal(part, whole[off:]) {
			t.Fatalf("fillBytes at offset %d differs from the whole stream", off)
		}
	}
}

func baseConfig() Config {
	return Config{Ops: coll.Kinds(),
		Sizes: []int64{4, 1 << 10, 100<<10 + 8}, DType: coll.Float32, RedOp: coll.Sum, OutOfPlace: true,
		InPlace: true, Check: true, Iters: 3, Warmup: 1, Seed: 42}
}

// TestRunFake checks the harness plumbing (layouts, in-place spans, data,
// reference, exchange) against an in-process job for every op, several
// dtypes, reductions and rank counts.
func TestRunFake(t *testing.T) {
	defer func(c int64) { chunk = c }(chunk)
	chunk = 4096 // many chunks per buffer, boundaries inside elements of every rank
	for _, c := range []struct {
		n  int
		dt coll.DType
		op coll.ReduceOp
	}{
		{1, coll.Float32, coll.Sum}, {2, coll.Float32, coll.Sum}, {3, coll.BFloat16, coll.Avg},
		{2, coll.Float16, coll.Max}, {4, coll.Int32, coll.Min}, {3, coll.Float64, coll.Avg},
		{2, coll.Int64, coll.Sum}, {3, coll.Int8, coll.Sum}, {2, coll.Uint8, coll.Max},
	} {
		cfg := baseConfig()
		cfg.DType, cfg.RedOp, cfg.Root = c.dt, c.op, c.n-1
		rep, err := runFake(c.n, cfg, 0)
		if err != nil {
			t.Fatalf("%d ranks %v %v: %v", c.n, c.dt, c.op, err)
		}
		if rep.WrongTotal() != 0 {
			var b strings.Builder
			WriteTable(&b, rep)
			t.Fatalf("%d ranks %v %v: %d wrong\n%s", c.n, c.dt, c.op, rep.WrongTotal(), b.String())
		}
		if len(rep.Results) == 0 || rep.Results[0].OutOfPlace.Iters != 3 {
			t.Fatalf("unexpected results %+v", rep.Results)
		}
	}
}

// TestRunFakeCatchesCorruption: flipped outputs are counted, per element,
// in the first round (later rounds only time).
func TestRunFakeCatchesCorruption(t *testing.T) {
	for _, rounds := range []int{0, 1, 3} {
		cfg := baseConfig()
		cfg.Sizes, cfg.Rounds = []int64{1 << 12}, rounds
		rep, err := runFake(2, cfg, 3)
		if err != nil {
			t.Fatal(err)
		}
		const want = 3
		for _, r := range rep.Results {
			for _, m := range r.measures() {
				if m.Wrong != want {
					t.Errorf("%s, %d rounds: #wrong %d, want %d (three corrupted elements on rank 0 per call)", r.Op, rounds, m.Wrong, want)
				}
			}
		}
	}
}

func TestAdaptiveIterations(t *testing.T) {
	c := Config{Iters: 50, Warmup: 5, Budget: 1e8} // 100 ms
	for _, tc := range []struct {
		one         float64 // seconds
		iters, warm int
	}{{1e-6, 50, 5}, {0.01, 10, 5}, {0.05, 3, 3}, {1, 3, 3}} {
		it, w := c.iterations(durationOf(tc.one))
		if it != tc.iters || w != tc.warm {
			t.Errorf("iterations(%gs) = %d,%d want %d,%d", tc.one, it, w, tc.iters, tc.warm)
		}
	}
	c.Budget = 0
	if it, _ := c.iterations(durationOf(10)); it != 50 {
		t.Errorf("fixed iterations gave %d", it)
	}
}

func TestConfigErrors(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"no ops":     func(c *Config) { c.Ops = nil },
		"no sizes":   func(c *Config) { c.Sizes = nil },
		"root":       func(c *Config) { c.Root = 2 },
		"placement":  func(c *Config) { c.OutOfPlace, c.InPlace = false, false },
		"iters":      func(c *Config) { c.Iters = 0 },
		"warmup":     func(c *Config) { c.Warmup = -1 },
		"rounds":     func(c *Config) { c.Rounds = -1 },
		"bad dtype":  func(c *Config) { c.DType = 99 },
		"bad op":     func(c *Config) { c.Ops = []coll.Kind{7} },
		"bad reduce": func(c *Config) { c.RedOp = 9 },
	} {
		c := baseConfig()
		mod(&c)
		if err := c.Validate(2); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	c := baseConfig()
	if err := c.Validate(2); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

// goldenReport is a fixed report for the format tests.
func goldenReport() *Report {
	m := func(us float64, k coll.Kind, bytes int64, wrong int64, staged bool) *Measure {
		alg, bus := Bandwidth(k, 2, bytes, us)
		return &Measure{TimeUs: us, AlgBW: alg, BusBW: bus, Wrong: wrong, Iters: 20, Warmup: 5, Path: "direct",
			Staged: staged, VsMemcpy: bus / 10}
	}
	return &Report{Backend: "cpu", Ranks: 2, DType: "float", RedOp: "sum", Symmetric: true, Checked: true, Seed: 1,
		Date: "2026-11-21T00:00:00Z", Seconds: 1.25, Command: "symmem bench -b 1K -e 64M", Host: "test host",
		Results: []Result{
			{Op: "all_gather", Algo: "auto", Bytes: 1024, Count: 256, Type: "float", RedOp: "none", Root: -1,
				OutOfPlace: m(5.5, coll.AllGather, 1024, 0, false), InPlace: m(4.25, coll.AllGather, 1024, 0, false), MemcpyGBps: 10},
			{Op: "all_gather", Algo: "auto", Bytes: 64 << 20, Count: 16 << 20, Type: "float", RedOp: "none", Root: -1,
				OutOfPlace: m(12345.6, coll.AllGather, 64<<20, 0, false), InPlace: m(6000, coll.AllGather, 64<<20, 0, false), MemcpyGBps: 10},
			{Op: "all_reduce", Algo: "auto", Bytes: 1 << 20, Count: 1 << 18, Type: "float", RedOp: "sum", Root: -1,
				OutOfPlace: m(150.25, coll.AllReduce, 1<<20, 2, true), MemcpyGBps: 12.5},
		}}
}

func TestTableGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, goldenReport()); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "table.golden")
	if *update {
		os.WriteFile(golden, b.Bytes(), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./bench -run Golden -update to create it)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("table differs from %s:\n--- got\n%s--- want\n%s", golden, b.String(), want)
	}
	if !strings.Contains(b.String(), "# Out of bounds values : 2 FAILED\n") || !strings.Contains(b.String(), "# Out of bounds values : 0 OK\n") {
		t.Error("table does not report the wrong elements per block as nccl-tests does")
	}
}

// ncclRow is the 13-column row pattern of published nccl-tests parsers (the
// same regular expression appears in several public result collectors, e.g.
// the `_parse_nccl_test_results` data pattern: size, count, type, redop,
// root, then time/algbw/busbw/#wrong out-of-place and in-place); ncclRow9 is
// the 9-column prefix others match (out-of-place only).
var (
	ncclRow  = regexp.MustCompile(`^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\S+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\S+)\s*$`)
	ncclRow9 = regexp.MustCompile(`^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)`)
	ncclAvg  = regexp.MustCompile(`# Avg bus bandwidth\s+:\s+([0-9.]+)`)
	ncclOOB  = regexp.MustCompile(`# Out of bounds values : (\d+) (OK|FAILED)`)
)

// TestTableParses: every data line matches the parsers' patterns, with
// nccl-tests' type names and exactly 13 fields when both placements run;
// everything else is a comment.
func TestTableParses(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, goldenReport()); err != nil {
		t.Fatal(err)
	}
	rows13, rows9 := 0, 0
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if !ncclRow9.MatchString(line) {
			t.Errorf("data line does not parse: %q", line)
		}
		if m := ncclRow.FindStringSubmatch(line); m != nil {
			rows13++
			if m[3] != "float" || len(strings.Fields(line)) != 13 {
				t.Errorf("row %q: type %q, %d fields; want float, 13", line, m[3], len(strings.Fields(line)))
			}
		} else {
			rows9++
		}
	}
	if rows13 != 2 || rows9 != 1 {
		t.Errorf("%d 13-column and %d 9-column rows, want 2 and 1:\n%s", rows13, rows9, b.String())
	}
	if got := ncclAvg.FindAllStringSubmatch(b.String(), -1); len(got) != 2 {
		t.Errorf("want an average bus bandwidth per block, got %v", got)
	}
	if got := ncclOOB.FindAllStringSubmatch(b.String(), -1); len(got) != 2 || got[1][1] != "2" {
		t.Errorf("want out-of-bounds lines 0 OK and 2 FAILED, got %v", got)
	}
}

// TestRunStreamsRows: OnRow sees each row as its size completes, before Run
// returns, with the settings already filled in.
func TestRunStreamsRows(t *testing.T) {
	cfg := baseConfig()
	var got []int64
	var tb bytes.Buffer
	table := NewTable(&tb)
	cfg.OnRow = func(rep *Report, res Result) error {
		got = append(got, res.Bytes)
		if len(rep.Results) != len(got) || rep.Ranks != 2 {
			t.Errorf("OnRow: report has %d rows and %d ranks at row %d", len(rep.Results), rep.Ranks, len(got))
		}
		return table.Row(rep, res)
	}
	rep, err := runFake(2, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rep.Results) || len(got) == 0 {
		t.Fatalf("OnRow called %d times for %d rows", len(got), len(rep.Results))
	}
	var whole bytes.Buffer
	WriteTable(&whole, rep)
	table.Close(rep)
	if tb.String() != whole.String() {
		t.Errorf("streamed table differs from the whole one:\n%s\n---\n%s", tb.String(), whole.String())
	}
}

func TestJSONRoundTrip(t *testing.T) {
	var b bytes.Buffer
	r := goldenReport()
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.WrongTotal() != 2 || back.Results[1].InPlace.TimeUs != 6000 || back.Results[2].InPlace != nil {
		t.Errorf("JSON round trip lost data: %+v", back)
	}
}

func TestPlots(t *testing.T) {
	dir := t.TempDir()
	r := goldenReport()
	ss := plotSeries(r)
	var names []string
	for _, x := range ss {
		names = append(names, x.name)
	}
	want := []string{"all_gather auto out-of-place", "all_gather auto in-place", "all_reduce auto out-of-place", "memcpy baseline (same bytes)"}
	if !slices.Equal(names, want) || !ss[3].baseline || ss[0].baseline {
		t.Errorf("series %q (baseline flags %v %v), want %q", names, ss[0].baseline, ss[3].baseline, want)
	}
	svg := filepath.Join(dir, "p.svg")
	if err := WritePlot(svg, r); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(svg)
	dec := xml.NewDecoder(bytes.NewReader(data))
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if cd, ok := tok.(xml.CharData); ok {
			text.Write(cd)
		}
	}
	for _, w := range append(want, "bus bandwidth", "time per call (us)", "64M") {
		if !strings.Contains(text.String(), w) {
			t.Errorf("SVG lacks the text %q", w)
		}
	}
	pngPath := filepath.Join(dir, "p.png")
	if err := WritePlot(pngPath, r); err != nil {
		t.Fatal(err)
	}
	fh, _ := os.Open(pngPath)
	defer fh.Close()
	img, err := png.Decode(fh)
	if err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 1500 || b.Dy() < 600 {
		t.Errorf("PNG is only %v", b)
	}
	if err := WritePlot(filepath.Join(dir, "p.jpg"), r); err == nil || !strings.Contains(err.Error(), ".svg or .png") {
		t.Errorf("bad extension error: %v", err)
	}
}

// TestPlotRanges: sweeps whose points leave a panel empty or on a single
// value still plot (gonum's log axes panicked on them: `symmem bench -b 2M
// -e 4M --plot x.svg` crashed after the sweep, leaving an empty file).
func TestPlotRanges(t *testing.T) {
	big := func(r *Report) { // every size above the latency panel's 1 MiB
		r.Results = r.Results[1:2]
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Report)
		texts []string // in the SVG
	}{
		{"above 1M", big, []string{"bus bandwidth", "64M"}},
		{"above 1M on a GPU", func(r *Report) { big(r); r.Backend = "cuda" }, []string{"bus bandwidth"}},
		{"one point on a GPU", func(r *Report) { // one size, one placement, busbw under 1 GB/s
			r.Backend, r.Results = "cuda", r.Results[2:]
			r.Results[0].OutOfPlace.BusBW = 0.5
		}, []string{"bus bandwidth", "time per call (us)"}},
		{"every row refused", func(r *Report) {
			r.Backend = "cuda"
			for _, res := range r.Results {
				for _, m := range res.measures() {
					*m = Measure{Path: "refused", Refused: "no"}
				}
			}
		}, []string{"bus bandwidth"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := goldenReport()
			tc.edit(r)
			var svg, img bytes.Buffer
			if err := WriteSVG(&svg, r); err != nil {
				t.Fatal(err)
			}
			if err := WritePNG(&img, r); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.texts {
				if !strings.Contains(svg.String(), w) {
					t.Errorf("SVG lacks %q", w)
				}
			}
		})
	}
}

// TestPlotGPUBaseline: on a GPU backend the baseline is the plain NCCL rows
// of the same run, not a local memcpy.
func TestPlotGPUBaseline(t *testing.T) {
	r := goldenReport()
	r.Backend = "cuda"
	nccl := r.Results[0]
	nccl.Algo = "nccl"
	r.Results = append(r.Results, nccl)
	for _, s := range plotSeries(r) {
		if strings.Contains(s.name, "memcpy") {
			t.Errorf("GPU plot has a memcpy line %q", s.name)
		}
		if s.baseline != strings.Contains(s.name, " nccl ") {
			t.Errorf("series %q: baseline %v", s.name, s.baseline)
		}
	}
}

func durationOf(sec float64) time.Duration { return time.Duration(sec * 1e9) }

// TestRunFakeLarge covers the parallel data generation and checking (big
// chunks split over goroutines) and catches corruption there too.
func TestRunFakeLarge(t *testing.T) {
	cfg := baseConfig()
	cfg.Sizes, cfg.DType, cfg.RedOp = []int64{4<<20 + 64}, coll.Uint8, coll.Max
	for _, corrupt := range []int{0, 2} {
		rep, err := runFake(2, cfg, corrupt)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Results {
			for _, m := range r.measures() {
				if m.Wrong != int64(corrupt) {
					t.Errorf("%s corrupt=%d: #wrong %d", r.Op, corrupt, m.Wrong)
				}
			}
		}
	}
}

// TestRunFakeOffset: Config.Offset moves every call's input and output
// that many bytes past their allocations, the results stay right, the
// report says it; an offset off whole elements is refused.
func TestRunFakeOffset(t *testing.T) {
	for _, off := range []int64{0, 6} {
		j := newFakeJob(2)
		cfg := baseConfig()
		cfg.DType, cfg.Offset = coll.BFloat16, off
		cfg.Sizes = []int64{4 << 10, 64 << 10}
		rep, err := runFakeJob(j, cfg, 0)
		if err != nil {
			t.Fatalf("offset %d: %v", off, err)
		}
		if rep.Offset != off {
			t.Errorf("report offset %d, want %d", rep.Offset, off)
		}
		for _, res := range rep.Results {
			for _, m := range res.measures() {
				if m.Wrong != 0 || m.TimeUs <= 0 {
					t.Errorf("offset %d, %s %d: %+v", off, res.Op, res.Bytes, m)
				}
			}
		}
		// Slices and chunks are multiples of 16 bytes at these sizes, so
		// every span of the sweep's bf16 calls (a rank's slot too) is off
		// 16 by the offset (the harness's own float64 exchanges are not).
		for r, f := range j.ranks {
			swept := 0
			for _, b := range f.bufs {
				if b.dt != coll.BFloat16 {
					continue
				}
				swept++
				if int64(b.in) != off || int64(b.out) != off {
					t.Fatalf("offset %d: rank %d ran a call with input %d and output %d bytes off 16", off, r, b.in, b.out)
				}
			}
			if swept == 0 {
				t.Fatalf("rank %d ran no bf16 call", r)
			}
		}
	}
	cfg := baseConfig()
	cfg.Offset = 2 // float32: half an element
	if _, err := runFake(2, cfg, 0); err == nil || !strings.Contains(err.Error(), "want a multiple of float32's 4-byte elements") {
		t.Errorf("offset 2 of float32: %v", err)
	}
}

// TestRunFakeNoPathRows: a size no path serves (ErrNotSupported, even
// through auto: a GPU whose ranks share it has no NCCL) is a row that says
// why, and the sweep goes on to the sizes after it.
func TestRunFakeNoPathRows(t *testing.T) {
	j := newFakeJob(2)
	j.noPathOver = 1 << 10
	cfg := baseConfig()
	cfg.Ops, cfg.Algos = []coll.Kind{coll.AllReduce}, []coll.Algo{coll.AlgoAuto}
	cfg.Sizes = []int64{1 << 10, 64 << 10}
	rep, err := runFakeJob(j, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	var refused, timed int
	for _, res := range rep.Results {
		for _, m := range res.measures() {
			switch {
			case m.Refused != "":
				refused++
				if !strings.Contains(m.Refused, "no path") {
					t.Errorf("refusal without the reason: %+v", m)
				}
			case m.TimeUs > 0:
				timed++
			}
		}
	}
	if refused != 2 || timed != 2 {
		t.Fatalf("%d refused and %d timed measurements, want 2 and 2", refused, timed)
	}
}

// TestRunFakeRefusedRows: a forced algorithm that refuses some sizes
// (errs.Refused) yields "refused" rows with the reason, the sweep
// goes on, and the table, JSON and plot carry them.
func TestRunFakeRefusedRows(t *testing.T) {
	j := newFakeJob(2)
	j.refuseOver = 1 << 10
	cfg := baseConfig()
	cfg.Ops, cfg.Algos = []coll.Kind{coll.AllReduce}, []coll.Algo{coll.AlgoKernel, coll.AlgoAuto}
	cfg.Sizes = []int64{1 << 10, 64 << 10}
	rep, err := runFakeJob(j, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	var refused, timed int
	for _, res := range rep.Results {
		for _, m := range res.measures() {
			switch {
			case m.Refused != "":
				refused++
				if res.Algo != string(coll.AlgoKernel) || res.Bytes != 64<<10 || m.Path != "refused" || !strings.Contains(m.Refused, "over 1024") {
					t.Errorf("unexpected refusal %s %d: %+v", res.Algo, res.Bytes, m)
				}
			case m.TimeUs > 0:
				timed++
			}
		}
	}
	if refused != 2 || timed != 6 {
		t.Fatalf("%d refused and %d timed measurements, want 2 (kernel 64K, both placements) and 6", refused, timed)
	}
	var b strings.Builder
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "out-of-place refused: fake: 65536 bytes per rank is over 1024") {
		t.Fatalf("table lacks the refusal:\n%s", b.String())
	}
	var svg, img bytes.Buffer
	if err := WriteJSON(io.Discard, rep); err != nil {
		t.Fatal(err)
	}
	if err := WriteSVG(&svg, rep); err != nil {
		t.Fatal(err)
	}
	if err := WritePNG(&img, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(svg.String(), "all_reduce kernel out-of-place") {
		t.Fatal("the plot lacks the timed kernel rows beside the refused ones")
	}
}

// TestAdaptiveIterationsSlowFirstCalls: each rank's first calls are slow
// (20 ms: first touches, lazy setup), the one the count is sized from
// included; the count is sized again from a batch where the budget bounds
// it, so the fast calls after them fill the budget instead of the slow
// call's estimate (100 ms / 20 ms: 5 calls; the old code timed 4).
func TestAdaptiveIterationsSlowFirstCalls(t *testing.T) {
	j := newFakeJob(2)
	j.slowFirst, j.slowFor = 6, 20*time.Millisecond // through the call the count is sized from (the 5th; 6 fails the old code, 8 slows the calibration batch too)
	cfg := baseConfig()
	cfg.Ops, cfg.Algos = []coll.Kind{coll.AllGather}, []coll.Algo{coll.AlgoAuto}
	cfg.Sizes = []int64{4 << 10}
	cfg.Iters, cfg.Budget, cfg.Samples, cfg.Rounds = 400, 100*time.Millisecond, 0, 1
	rep, err := runFakeJob(j, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Results[0].OutOfPlace
	if m == nil || m.Iters < 100 {
		t.Fatalf("timed %+v calls after slow first calls; want the count sized from fast calls (>= 100 of at most 400)", m)
	}
}

// TestBySize: BySize measures every algorithm at a size before the next
// size, round by round (two rounds here), and reports the same rows in the
// same order (algorithm by algorithm) as the default order, whose calls
// go algorithm by algorithm, each row's rounds together.
func TestBySize(t *testing.T) {
	cfg := baseConfig()
	cfg.Ops, cfg.Algos = []coll.Kind{coll.AllGather}, []coll.Algo{coll.AlgoDirect, coll.AlgoNCCL}
	cfg.Sizes, cfg.InPlace, cfg.Check, cfg.Iters, cfg.Warmup, cfg.Rounds = []int64{64, 256, 1024}, false, true, 2, 0, 2
	first := func(runs []string) []string { // the first call of each (algo, size) run
		var out []string
		for _, r := range runs {
			if strings.HasPrefix(r, "auto/") {
				continue // the harness's own exchanges (results, checks)
			}
			if len(out) == 0 || out[len(out)-1] != r {
				out = append(out, r)
			}
		}
		return out
	}
	var rows [2][]string
	var orders [2][]string
	for i, bySize := range []bool{false, true} {
		c := cfg
		c.BySize = bySize
		var emitted []string
		c.OnRow = func(_ *Report, res Result) error {
			emitted = append(emitted, fmt.Sprintf("%s/%d", res.Algo, res.Bytes))
			return nil
		}
		j := newFakeJob(2)
		rep, err := runFakeJob(j, c, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Results {
			rows[i] = append(rows[i], fmt.Sprintf("%s/%d", r.Algo, r.Bytes))
			if r.OutOfPlace == nil || r.OutOfPlace.Wrong != 0 || r.OutOfPlace.TimeUs <= 0 {
				t.Fatalf("BySize %v: row %s/%d not measured: %+v", bySize, r.Algo, r.Bytes, r.OutOfPlace)
			}
		}
		if !slices.Equal(emitted, rows[i]) {
			t.Errorf("BySize %v: OnRow saw %v, the report has %v", bySize, emitted, rows[i])
		}
		orders[i] = first(j.ranks[0].runs)
	}
	if !slices.Equal(rows[0], rows[1]) {
		t.Errorf("rows differ: default %v, BySize %v", rows[0], rows[1])
	}
	wantDefault := []string{"direct/32", "direct/128", "direct/512", "nccl/32", "nccl/128", "nccl/512"}
	wantBySize := []string{"direct/32", "nccl/32", "direct/32", "nccl/32", "direct/128", "nccl/128", "direct/128", "nccl/128",
		"direct/512", "nccl/512", "direct/512", "nccl/512"}
	if !slices.Equal(orders[0], wantDefault) || !slices.Equal(orders[1], wantBySize) {
		t.Errorf("call order: default %v (want %v), BySize %v (want %v)", orders[0], wantDefault, orders[1], wantBySize)
	}
}

// TestNoMemcpy: without the memcpy baseline (symmem tune) no copy is
// timed, rows have no memcpy bandwidth or ratio, the JSON encodes, and the
// table says so instead of printing zeros.
func TestNoMemcpy(t *testing.T) {
	j := newFakeJob(2)
	cfg := baseConfig()
	cfg.NoMemcpy, cfg.Rounds = true, 2
	rep, err := runFakeJob(j, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := j.memcpys.Load(); n != 0 {
		t.Errorf("%d memcpys timed", n)
	}
	for _, r := range rep.Results {
		if r.MemcpyGBps != 0 {
			t.Errorf("%s %d bytes: memcpy %v GB/s", r.Op, r.Bytes, r.MemcpyGBps)
		}
		for _, m := range r.measures() {
			if m.VsMemcpy != 0 || m.TimeUs <= 0 {
				t.Errorf("%s %d bytes: %+v", r.Op, r.Bytes, m)
			}
		}
	}
	var js, tb strings.Builder
	if err := WriteJSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"no_memcpy": true`) {
		t.Errorf("JSON lacks no_memcpy:\n%.400s", js.String())
	}
	if err := WriteTable(&tb, rep); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(tb.String(), "busbw/memcpy") || !strings.Contains(tb.String(), "fastest of 2 rounds (no memcpy baseline)") {
		t.Errorf("table:\n%s", tb.String())
	}
	// With the baseline (the default) the same fake job times copies.
	cfg.NoMemcpy = false
	if _, err := runFakeJob(j, cfg, 0); err != nil || j.memcpys.Load() == 0 {
		t.Errorf("with the baseline: %v, %d memcpys", err, j.memcpys.Load())
	}
}

// checkingRank is a fake rank whose backend has no two-shot all-gather
// path (as the GPU backend) and no ce path at all.
type checkingRank struct{ *fakeRank }

func (c checkingRank) CheckAlgo(k coll.Kind, a coll.Algo) error {
	if a == coll.AlgoCE || (a == coll.AlgoTwoShot && k == coll.AllGather) {
		return fmt.Errorf("algorithm %q is not available for %v on the fake backend: %w", a, k, errs.NotSupported)
	}
	return nil
}

// TestRunSkipsPairsTheBackendLacks: an op/algorithm pair the backend does
// not have is skipped with a line saying why and the sweep goes on (it
// aborted the whole run: `--ops all_gather,all_reduce --algo two-shot,...`
// on a GPU); a sweep with no pair left fails up front.
func TestRunSkipsPairsTheBackendLacks(t *testing.T) {
	run := func(cfg Config) (*Report, error) {
		j := newFakeJob(2)
		reps, errs := make([]*Report, 2), make([]error, 2)
		var wg sync.WaitGroup
		for r := range 2 {
			wg.Add(1)
			go func() { defer wg.Done(); reps[r], errs[r] = Run(checkingRank{j.ranks[r]}, cfg) }()
		}
		wg.Wait()
		return reps[0], errors.Join(errs...)
	}
	cfg := baseConfig()
	cfg.Ops = []coll.Kind{coll.AllGather, coll.AllReduce}
	cfg.Algos = []coll.Algo{coll.AlgoTwoShot, coll.AlgoCE, coll.AlgoAuto}
	cfg.Sizes = []int64{1 << 10}
	for _, bySize := range []bool{false, true} {
		cfg.BySize = bySize
		rep, err := run(cfg)
		if err != nil {
			t.Fatalf("BySize %v: %v", bySize, err)
		}
		var got []string
		for _, res := range rep.Results {
			got = append(got, res.Op+"/"+res.Algo)
		}
		if want := []string{"all_gather/auto", "all_reduce/two-shot", "all_reduce/auto"}; !slices.Equal(got, want) {
			t.Errorf("BySize %v: rows %v, want %v", bySize, got, want)
		}
		var b strings.Builder
		if err := WriteTable(&b, rep); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			`# all_gather with --algo two-shot: refused, skipped: algorithm "two-shot" is not available for all_gather`,
			`# all_gather with --algo ce: refused, skipped:`,
			`# all_reduce with --algo ce: refused, skipped:`,
		} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("BySize %v: table lacks %q:\n%s", bySize, want, b.String())
			}
		}
		if len(rep.Skipped) != 3 {
			t.Errorf("BySize %v: Skipped %+v, want 3 pairs", bySize, rep.Skipped)
		}
	}
	cfg.Algos = []coll.Algo{coll.AlgoCE}
	if _, err := run(cfg); err == nil || !strings.Contains(err.Error(), "no op/algorithm pair can run") {
		t.Errorf("every pair skipped: %v, want an error", err)
	}
}
