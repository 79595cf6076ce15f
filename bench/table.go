package bench

import (
	"fmt"
	"io"
	"strings"

	"github.com/symmem/symmem/coll"
)

// TypeName is nccl-tests' name of dt (float, half, bfloat16, double, int32,
// int64, int8, uint8), which parsers of its output expect.
func TypeName(dt coll.DType) string {
	switch dt {
	case coll.Float32:
		return "float"
	case coll.Float16:
		return "half"
	case coll.Float64:
		return "double"
	}
	return dt.String()
}

// Table writes nccl-tests-format output while a sweep runs: a block per op
// and algorithm with nccl-tests' header, data rows of exactly its 13 columns
// (9 when only one placement is measured), and its footer lines. symmem's
// extras (the path each placement took, the memcpy baseline and busbw's
// share of it) go on a "#" line under each row, so parsers skip them. Each
// row is one Write: on an unbuffered writer such as os.Stdout it is out as
// soon as its size completes, and a killed run keeps its rows.
type Table struct {
	w        io.Writer
	err      error
	started  bool
	op, algo string
	busSum   float64
	busN     int
	wrong    int64
	checked  bool
}

// NewTable returns a Table writing to w.
func NewTable(w io.Writer) *Table { return &Table{w: w} }

func (t *Table) write(s string) {
	if t.err == nil {
		_, t.err = io.WriteString(t.w, s)
	}
}

// Row writes res (and, first, the preamble from rep's settings and any
// block header or footer due). rep needs only its settings, not Results.
func (t *Table) Row(rep *Report, res Result) error {
	var b strings.Builder
	if !t.started {
		t.started, t.checked = true, rep.Checked
		writePreamble(&b, rep)
	}
	if res.Op != t.op || res.Algo != t.algo {
		if t.op != "" {
			t.footer(&b)
			if res.Op != t.op {
				writeAutoBest(&b, rep, t.op)
			}
		}
		t.op, t.algo = res.Op, res.Algo
		writeHeader(&b, res)
	}
	fmt.Fprintf(&b, "%12d  %12d  %8s  %6s  %6d", res.Bytes, res.Count, res.Type, res.RedOp, res.Root)
	var extras []string
	for _, m := range res.measures() {
		name := "out-of-place"
		if m == res.InPlace {
			name = "in-place"
		}
		if m.Refused != "" {
			fmt.Fprintf(&b, "  %7s  %6s  %6s  %5s", "n/a", "n/a", "n/a", "n/a")
			extras = append(extras, fmt.Sprintf("%s refused: %s", name, m.Refused))
			continue
		}
		wrong := fmt.Sprintf("%5d", m.Wrong)
		if !rep.Checked {
			wrong = "  N/A"
		}
		fmt.Fprintf(&b, "  %s  %6.2f  %6.2f  %s", fmtTime(m.TimeUs), m.AlgBW, m.BusBW, wrong)
		t.busSum += m.BusBW
		t.busN++
		t.wrong += m.Wrong
		x := fmt.Sprintf("%s %s", name, m.path())
		if res.MemcpyGBps > 0 {
			x += fmt.Sprintf(" %.0f%%", 100*m.VsMemcpy)
		}
		extras = append(extras, x)
	}
	b.WriteString("\n")
	if res.MemcpyGBps > 0 {
		fmt.Fprintf(&b, "#   path, busbw/memcpy: %s; memcpy %.2f GB/s\n", strings.Join(extras, ", "), res.MemcpyGBps)
	} else {
		fmt.Fprintf(&b, "#   path: %s\n", strings.Join(extras, ", "))
	}
	t.write(b.String())
	return t.err
}

// Close writes the last block's footer and the sweep's closing line.
func (t *Table) Close(rep *Report) error {
	var b strings.Builder
	if !t.started {
		writePreamble(&b, rep)
	}
	if t.op != "" {
		t.footer(&b)
		writeAutoBest(&b, rep, t.op)
	}
	fmt.Fprintf(&b, "# symmem: %d rows in %.1f s, %d wrong elements in total\n", len(rep.Results), rep.Seconds, rep.WrongTotal())
	t.write(b.String())
	return t.err
}

// writeAutoBest writes, after the last block of op, a "#" line per size of
// auto's block with auto/best (Measure.AutoVsBest): nothing when the sweep
// measured auto alone or no other algorithm. "#" lines keep parsers of
// nccl-tests' rows working, and the numbers need every algorithm of the
// size, which the rows of auto's own block (measured first) cannot wait
// for. The lines avoid the word "algo", which scripts/gpu-allreduce-4.sh
// greps for block headers.
func writeAutoBest(b *strings.Builder, rep *Report, op string) {
	head := false
	for _, res := range rep.Results {
		if res.Op != op || res.Algo != "auto" {
			continue
		}
		var parts []string
		for _, m := range res.measures() {
			if m.AutoVsBest == 0 {
				continue
			}
			name := "out-of-place"
			if m == res.InPlace {
				name = "in-place"
			}
			parts = append(parts, fmt.Sprintf("%s %.2f (auto %s %s us, best %s %s us)", name, m.AutoVsBest, m.path(),
				strings.TrimSpace(fmtTime(m.TimeUs)), m.BestAlgo, strings.TrimSpace(fmtTime(m.BestUs))))
		}
		if len(parts) == 0 {
			continue
		}
		if !head {
			head = true
			fmt.Fprintf(b, "# auto/best, %s: the fastest other path's time over auto's at each size (1.00: auto matches it)\n", op)
		}
		fmt.Fprintf(b, "#   auto/best %12d  %s\n", res.Bytes, strings.Join(parts, ", "))
	}
	if head {
		b.WriteString("#\n")
	}
}

// footer is nccl-tests' closing lines of one block.
func (t *Table) footer(b *strings.Builder) {
	status := "OK"
	if t.wrong != 0 {
		status = "FAILED"
	}
	fmt.Fprintf(b, "# Out of bounds values : %d %s\n", t.wrong, status)
	avg := 0.0
	if t.busN > 0 {
		avg = t.busSum / float64(t.busN)
	}
	fmt.Fprintf(b, "# Avg bus bandwidth    : %.3f \n#\n", avg)
	t.busSum, t.busN, t.wrong = 0, 0, 0
}

// WriteTable writes a finished report in the Table format.
func WriteTable(w io.Writer, r *Report) error {
	t := NewTable(w)
	for _, res := range r.Results {
		if err := t.Row(r, res); err != nil {
			return err
		}
	}
	return t.Close(r)
}

func writePreamble(b *strings.Builder, r *Report) {
	mem := "symmetric"
	if !r.Symmetric {
		mem = "plain (staged)"
	}
	check := 1
	if !r.Checked {
		check = 0
	}
	mem += " buffers"
	if r.Offset != 0 {
		mem += fmt.Sprintf(" at offset %d", r.Offset)
	}
	fmt.Fprintf(b, "# symmem bench: backend %s, nRanks %d, type %s, redop %s, %s, validation: %d, seed %d\n",
		r.Backend, r.Ranks, r.DType, r.RedOp, mem, check, r.Seed)
	switch {
	case r.Rounds > 1 && r.NoMemcpy:
		fmt.Fprintf(b, "# each row: fastest of %d rounds (no memcpy baseline)\n", r.Rounds)
	case r.Rounds > 1:
		fmt.Fprintf(b, "# each row: fastest of %d rounds (memcpy: fastest of %d measurements, before and after each round)\n", r.Rounds, 2*r.Rounds)
	}
	if r.MemcpyThreads > 0 && !r.NoMemcpy {
		fmt.Fprintf(b, "# memcpy baseline: every rank copies at once, from 4 MiB on %d thread(s) each (its share of the CPUs): the machine's copy bandwidth\n", r.MemcpyThreads)
	}
	if r.Command != "" {
		fmt.Fprintf(b, "# command: %s\n", r.Command)
	}
	if r.Host != "" {
		fmt.Fprintf(b, "# host: %s\n", r.Host)
	}
	for _, sk := range r.Skipped {
		fmt.Fprintf(b, "# %s with --algo %s: refused, skipped: %s\n", sk.Op, sk.Algo, sk.Reason)
	}
	b.WriteString("#\n")
}

// nccl-tests' header lines, character for character (parsers look for
// them); hdrOne is how much of each line covers one placement.
const (
	hdrPlace = "#                                                              out-of-place                       in-place          "
	hdrCols  = "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
	hdrUnits = "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "
	hdrOne   = 84
)

// writeHeader is nccl-tests' column header, after a line naming the block.
// With one placement the in-place half is left out, whichever it is.
func writeHeader(b *strings.Builder, res Result) {
	fmt.Fprintf(b, "# %s, algo %s\n", res.Op, res.Algo)
	if ms := res.measures(); len(ms) == 2 {
		b.WriteString(hdrPlace + "\n" + hdrCols + "\n" + hdrUnits + "\n")
		return
	}
	name := "out-of-place"
	if res.OutOfPlace == nil {
		name = "in-place"
	}
	fmt.Fprintf(b, "#%*s\n%s\n%s\n", 62+len(name)-1, name, hdrCols[:hdrOne], strings.TrimRight(hdrUnits[:hdrOne], " "))
}

// fmtTime follows nccl-tests: fewer decimals for longer times.
func fmtTime(us float64) string {
	switch {
	case us >= 10000:
		return fmt.Sprintf("%7.0f", us)
	case us >= 100:
		return fmt.Sprintf("%7.1f", us)
	}
	return fmt.Sprintf("%7.2f", us)
}
