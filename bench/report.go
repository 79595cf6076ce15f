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
	// Offset is Config.Offset: the buffers start this many bytes past
	// their allocations' aligned starts.
	Offset  int64  `json:"offset,omitempty"`
	Checked bool   `json:"checked"`
	Seed    uint64 `json:"seed"`
	Rounds  int    `json:"rounds"` // each row is the fastest of this many rounds
	// NoMemcpy: no memcpy baseline was timed (Config.NoMemcpy).
	NoMemcpy bool `json:"no_memcpy,omitempty"`
	// MemcpyThreads is how many threads each rank's memcpy baseline used
	// (0: not known to the harness).
	MemcpyThreads int     `json:"memcpy_threads,omitempty"`
	Date          string  `json:"date"`
	Seconds       float64 `json:"seconds"` // wall time of the sweep
	Command       string  `json:"command,omitempty"`
	Host          string  `json:"host,omitempty"`
	// Machine is the GPU machine the sweep ran on, as auto tables record
	// it (the program fills it in; nil on the CPU backend).
	Machine *Machine `json:"machine,omitempty"`
	// Skipped lists the op/algorithm pairs the backend does not have
	// (Target's AlgoChecker): they have no rows.
	Skipped []Skip   `json:"skipped,omitempty"`
	Results []Result `json:"results"`
}

// Skip is an op/algorithm pair a sweep skipped, and why.
type Skip struct {
	Op     string `json:"op"`
	Algo   string `json:"algo"`
	Reason string `json:"reason"`
}

// Machine describes a GPU machine (internal/tune reads these fields).
type Machine struct {
	GPU    string `json:"gpu"`
	Count  int    `json:"count"`
	Link   string `json:"link"`
	Driver string `json:"driver"`
	NCCL   string `json:"nccl"`
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
	Wrong  int64   `json:"wrong"` // wrong elements summed over ranks (the first round checks)
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
	// AutoVsBest is set on auto's rows when the sweep measured other
	// algorithms too: the fastest other algorithm's time at this size and
	// placement over auto's (auto's speed relative to the best: 1 matches
	// it, below 1 is slower; the goal is 0.97 or more). BestAlgo and
	// BestUs are that algorithm and its time.
	AutoVsBest float64 `json:"auto_vs_best,omitempty"`
	BestAlgo   string  `json:"best_algo,omitempty"`
	BestUs     float64 `json:"best_time_us,omitempty"`
}

// fillAutoBest sets AutoVsBest, BestAlgo and BestUs on the auto rows of
// results from the other algorithms' rows of the same op and size.
func fillAutoBest(results []Result) {
	for i := range results {
		a := &results[i]
		if a.Algo != "auto" {
			continue
		}
		for _, inPlace := range []bool{false, true} {
			am := a.placement(inPlace)
			if am == nil || am.Refused != "" || am.TimeUs <= 0 {
				continue
			}
			am.AutoVsBest, am.BestAlgo, am.BestUs = 0, "", 0
			for _, o := range results {
				m := o.placement(inPlace)
				if o.Algo == "auto" || o.Op != a.Op || o.Bytes != a.Bytes || m == nil || m.Refused != "" || m.TimeUs <= 0 {
					continue
				}
				if am.BestUs == 0 || m.TimeUs < am.BestUs {
					am.BestAlgo, am.BestUs = o.Algo, m.TimeUs
				}
			}
			if am.BestUs > 0 {
				am.AutoVsBest = am.BestUs / am.TimeUs
			}
		}
	}
}

func (r *Result) placement(inPlace bool) *Measure {
	if inPlace {
		return r.InPlace
	}
	return r.OutOfPlace
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
	s := fmt.Sprintf("%s %s %s: %s", r.Op, r.Algo, FormatSize(r.Bytes), strings.Join(parts, ", "))
	if r.MemcpyGBps > 0 {
		s += fmt.Sprintf("; memcpy %.2f GB/s", r.MemcpyGBps)
	}
	return s
}
