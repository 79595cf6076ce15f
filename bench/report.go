package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Report is the outcome of one sweep, identical on every rank.
type Report struct {
	Backend   string   `json:"backend"`
	Ranks     int      `json:"ranks"`
	DType     string   `json:"dtype"`
	RedOp     string   `json:"redop"`
	Root      int      `json:"root"`
	Symmetric bool     `json:"symmetric"` // buffers came from the symmetric pool
	Checked   bool     `json:"checked"`
	Seed      uint64   `json:"seed"`
	Rounds    int      `json:"rounds"` // each row is the fastest of this many rounds
	Date      string   `json:"date"`
	Seconds   float64  `json:"seconds"` // wall time of the sweep
	Command   string   `json:"command,omitempty"`
	Host      string   `json:"host,omitempty"`
	Results   []Result `json:"results"`
}

// Result is one op/algo/size row.
type Result struct {
	Op         string   `json:"op"`
	Algo       string   `json:"algo"` // requested
	Bytes      int64    `json:"bytes"`
	Count      int64    `json:"count"`
	Type       string   `json:"type"`
	RedOp      string   `json:"redop"`
	Root       int      `json:"root"`
	OutOfPlace *Measure `json:"out_of_place,omitempty"`
	InPlace    *Measure `json:"in_place,omitempty"`
	MemcpyGBps float64  `json:"memcpy_gbps"` // local copy of Bytes, all ranks at once
}

// Measure is one placement of one row. Bandwidths are GB/s (1e9 bytes).
type Measure struct {
	TimeUs   float64 `json:"time_us"` // per call, maximum over ranks of the per-rank average
	AlgBW    float64 `json:"algbw"`
	BusBW    float64 `json:"busbw"`
	Wrong    int64   `json:"wrong"` // wrong elements summed over ranks and rounds
	Iters    int     `json:"iters"`
	Warmup   int     `json:"warmup"`
	Path     string  `json:"path"` // algorithm the backend used
	Staged   bool    `json:"staged"`
	Reason   string  `json:"reason,omitempty"`
	VsMemcpy float64 `json:"busbw_vs_memcpy"`
	// Refused says why a forced algorithm could not run this call (the
	// backend's error); the row then has no timing.
	Refused string `json:"refused,omitempty"`
}

// WrongTotal sums #wrong over every measurement.
func (r *Report) WrongTotal() int64 {
	var n int64
	for _, res := range r.Results {
		for _, m := range res.measures() {
			n += m.Wrong
		}
	}
	return n
}

func (r Result) measures() []*Measure {
	var out []*Measure
	for _, m := range []*Measure{r.OutOfPlace, r.InPlace} {
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

func (m *Measure) path() string {
	if m.Staged {
		return m.Path + "+staged"
	}
	return m.Path
}

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
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

// WriteTable writes nccl-tests-style tables, one per op and algorithm, with
// the memcpy baseline and busbw/memcpy beside each row.
func WriteTable(w io.Writer, r *Report) error {
	var b strings.Builder
	mem := "symmetric"
	if !r.Symmetric {
		mem = "plain (staged)"
	}
	check := "on"
	if !r.Checked {
		check = "off"
	}
	fmt.Fprintf(&b, "# symmem bench: backend %s, %d ranks, dtype %s, redop %s, %s buffers, check %s, seed %d\n",
		r.Backend, r.Ranks, r.DType, r.RedOp, mem, check, r.Seed)
	if r.Rounds > 1 {
		fmt.Fprintf(&b, "# each row: fastest of %d rounds (memcpy: fastest of %d measurements, before and after each round)\n", r.Rounds, 2*r.Rounds)
	}
	if r.Command != "" {
		fmt.Fprintf(&b, "# command: %s\n", r.Command)
	}
	if r.Host != "" {
		fmt.Fprintf(&b, "# host: %s\n", r.Host)
	}
	var busSum float64
	var busN int
	var refusals []string
	for i, res := range r.Results {
		if i == 0 || res.Op != r.Results[i-1].Op || res.Algo != r.Results[i-1].Algo {
			writeHeader(&b, res)
		}
		fmt.Fprintf(&b, "%12d  %12d  %8s  %6s  %6d", res.Bytes, res.Count, res.Type, res.RedOp, res.Root)
		var paths []string
		for _, m := range res.measures() {
			if m.Refused != "" {
				fmt.Fprintf(&b, "  %s  %6s  %6s  %6s", "    n/a", "n/a", "n/a", "n/a")
				refusals = appendNew(refusals, fmt.Sprintf("# refused: %s %s algo %s: %s", res.Op, FormatSize(res.Bytes), res.Algo, m.Refused))
				if len(paths) == 0 || paths[0] != m.path() {
					paths = append(paths, m.path())
				}
				continue
			}
			wrong := fmt.Sprintf("%6d", m.Wrong)
			if !r.Checked {
				wrong = "   N/A"
			}
			fmt.Fprintf(&b, "  %s  %6.2f  %6.2f  %s", fmtTime(m.TimeUs), m.AlgBW, m.BusBW, wrong)
			busSum += m.BusBW
			busN++
			if len(paths) == 0 || paths[0] != m.path() {
				paths = append(paths, m.path())
			}
		}
		fmt.Fprintf(&b, "  %7.2f", res.MemcpyGBps)
		for _, m := range res.measures() {
			if m.Refused != "" {
				fmt.Fprintf(&b, "  %5s", "n/a")
				continue
			}
			fmt.Fprintf(&b, "  %4.0f%%", 100*m.VsMemcpy)
		}
		fmt.Fprintf(&b, "  %s\n", strings.Join(paths, "|"))
	}
	for _, line := range refusals {
		b.WriteString(line + "\n")
	}
	status := "OK"
	if n := r.WrongTotal(); n != 0 {
		status = fmt.Sprintf("FAILED: %d wrong elements", n)
	} else if !r.Checked {
		status = "not checked"
	}
	fmt.Fprintf(&b, "# Out of bounds values : %s\n", status)
	if busN > 0 {
		fmt.Fprintf(&b, "# Avg bus bandwidth    : %.3f GB/s\n", busSum/float64(busN))
	}
	fmt.Fprintf(&b, "# Sweep time           : %.1f s\n", r.Seconds)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeHeader(b *strings.Builder, res Result) {
	ms := res.measures()
	fmt.Fprintf(b, "#\n# %s, algo %s\n%-52s", res.Op, res.Algo, "#")
	for _, m := range ms {
		name := "out-of-place"
		if m == res.InPlace {
			name = "in-place"
		}
		b.WriteString(centre(name, 33))
	}
	fmt.Fprintf(b, "  %7s  %s\n", "memcpy", centre("vs memcpy", 7*len(ms)-2))
	fmt.Fprintf(b, "#%11s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root")
	for range ms {
		fmt.Fprintf(b, "  %7s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong")
	}
	fmt.Fprintf(b, "  %7s", "")
	for _, m := range ms {
		if m == res.InPlace {
			fmt.Fprintf(b, "  %5s", "in")
		} else {
			fmt.Fprintf(b, "  %5s", "oop")
		}
	}
	fmt.Fprintf(b, "  path\n")
	fmt.Fprintf(b, "#%11s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "")
	for range ms {
		fmt.Fprintf(b, "  %7s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "")
	}
	fmt.Fprintf(b, "  %7s", "(GB/s)")
	for range ms {
		fmt.Fprintf(b, "  %5s", "busbw")
	}
	b.WriteString("\n")
}

// centre pads s to width w with s in the middle of a dashed rule.
func centre(s string, w int) string {
	pad := w - len(s) - 2
	if pad < 2 {
		return "  " + s
	}
	return "  " + strings.Repeat("-", pad/2) + s + strings.Repeat("-", pad-pad/2)
}

// summary is one progress line.
func (r Result) summary() string {
	var parts []string
	for _, m := range r.measures() {
		name := "out-of-place"
		if m == r.InPlace {
			name = "in-place"
		}
		parts = append(parts, fmt.Sprintf("%s busbw %.2f GB/s %s #wrong %d", name, m.BusBW, m.path(), m.Wrong))
	}
	return fmt.Sprintf("%s %s %s: %s; memcpy %.2f GB/s", r.Op, r.Algo, FormatSize(r.Bytes),
		strings.Join(parts, ", "), r.MemcpyGBps)
}

// appendNew appends s unless it is already the last element.
func appendNew(list []string, s string) []string {
	if len(list) > 0 && list[len(list)-1] == s {
		return list
	}
	return append(list, s)
}
