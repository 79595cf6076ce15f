package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// SchemaVersion is the version of the JSON layout of Report; it changes
// when a field changes meaning or goes away.
const SchemaVersion = 2

// Report is the outcome of one sweep, identical on every rank.
type Report struct {
	Schema    int      `json:"schema_version"` // SchemaVersion
	Version   string   `json:"symmem_version,omitempty"`
	Args      []string `json:"args,omitempty"` // the command's arguments
	Backend   string   `json:"backend"`
	Ranks     int      `json:"ranks"`
	DType     string   `json:"dtype"`
	RedOp     string   `json:"redop"`
	Root      int      `json:"root"`
	Symmetric bool     `json:"symmetric"` // buffers came from the symmetric pool
	Checked   bool     `json:"checked"`
	Seed      uint64   `json:"seed"`
	Rounds    int      `json:"rounds"` // each row is the fastest of this many rounds
	// MemcpyThreads is how many threads each rank's memcpy baseline used
	// (0: not known to the harness).
	MemcpyThreads int      `json:"memcpy_threads,omitempty"`
	Date          string   `json:"date"`
	Seconds       float64  `json:"seconds"` // wall time of the sweep
	Command       string   `json:"command,omitempty"`
	Host          string   `json:"host,omitempty"`
	Results       []Result `json:"results"`
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
	TimeUs float64 `json:"time_us"` // per call, maximum over ranks of the per-rank average
	AlgBW  float64 `json:"algbw"`
	BusBW  float64 `json:"busbw"`
	Wrong  int64   `json:"wrong"` // wrong elements summed over ranks and rounds
	Iters  int     `json:"iters"`
	// P50Us and P99Us are percentiles of Samples calls timed one by one,
	// each followed by a Sync (maximum over ranks).
	P50Us   float64 `json:"p50_us,omitempty"`
	P99Us   float64 `json:"p99_us,omitempty"`
	Samples int     `json:"samples,omitempty"`
	// Graph is the number of calls per CUDA graph when replays were timed
	// (-G); 0 for eager calls.
	Graph    int     `json:"graph_calls,omitempty"`
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
