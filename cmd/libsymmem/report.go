package main

// #include <stdint.h>
import "C"

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/doctor"
)

// pathJSON is a coll.Path as the reports show it.
type pathJSON struct {
	Algo   string `json:"algo"`
	Staged bool   `json:"staged"`
	Reason string `json:"reason"`
}

func toPathJSON(p coll.Path) pathJSON {
	return pathJSON{Algo: string(p.Algo), Staged: p.Staged, Reason: p.Reason}
}

// putJSON encodes v into buf like put.
func putJSON(buf *C.char, capacity C.size_t, v any) C.int {
	b, err := json.Marshal(v)
	if err != nil {
		return fail(fmt.Errorf("symmem: encoding a report: %w", err))
	}
	return put(buf, capacity, string(b))
}

//export symmem_group_last_path
func symmem_group_last_path(gh C.uint64_t, buf *C.char, capacity C.size_t) C.int {
	g, err := lookup[*group](uint64(gh), "group")
	if err != nil {
		return fail(err)
	}
	g.mu.Lock()
	p := g.last
	g.mu.Unlock()
	return putJSON(buf, capacity, toPathJSON(p))
}

//export symmem_explain
func symmem_explain(gh C.uint64_t, kind C.int, bytes C.size_t, symmetric C.int, buf *C.char, capacity C.size_t) C.int {
	g, err := lookup[*group](uint64(gh), "group")
	if err != nil {
		return fail(err)
	}
	k := coll.Kind(kind)
	if k < coll.AllGather || k > coll.AllToAll {
		return fail(fmt.Errorf("symmem_explain: kind %d is not a symmem_kind (all-gather 0, reduce-scatter 1, all-reduce 2, broadcast 3, all-to-all 4): %w", int(kind), symmem.ErrInvalid))
	}
	if uint64(bytes) > math.MaxInt64 {
		return fail(fmt.Errorf("symmem_explain: bytes %d is larger than any buffer (at most %d): %w", uint64(bytes), int64(math.MaxInt64), symmem.ErrInvalid))
	}
	if !g.g.IsMember() {
		return fail(fmt.Errorf("symmem_explain on group %q: %w", g.g.Name(), symmem.ErrNotMember))
	}
	return putJSON(buf, capacity, toPathJSON(g.g.Explain(k, int64(bytes), symmetric != 0)))
}

// doctorJSON is doctor.Report (World.Doctor) with names instead of enum
// values; python's symmem.doctor() parses it, so its keys and shape stay.
type doctorJSON struct {
	Backend    string      `json:"backend"`
	Why        string      `json:"why"`    // why this backend (auto's choice)
	Detail     string      `json:"detail"` // the backend's description: device, driver, links, NCCL, groups
	Rank       int         `json:"rank"`
	Size       int         `json:"size"`
	LocalRank  int         `json:"local_rank"`
	LocalSize  int         `json:"local_size"`
	JobID      string      `json:"job_id"`
	TimeoutSec float64     `json:"timeout_s"`
	Checked    bool        `json:"checked"`
	Staging    int64       `json:"staging_bytes"`
	Groups     []groupJSON `json:"groups"`
	Pool       any         `json:"pool"`
	Paths      []opJSON    `json:"paths"`
	// Added keys (issue 24): this rank's machine as auto tables record it,
	// and the table auto reads.
	Machine   doctor.Machine `json:"machine"`
	AutoTable *autoTableJSON `json:"auto_table"`
}

// autoTableJSON is doctor.AutoTable: source is "built-in", a file's path,
// or "" (no table; note says why).
type autoTableJSON struct {
	Source  string         `json:"source"`
	From    string         `json:"from,omitempty"`
	Sources []string       `json:"sources"`
	Machine doctor.Machine `json:"machine"`
	Date    string         `json:"date"`
	Command string         `json:"command"`
	Note    string         `json:"note"`
	// GraphRows: rows for calls captured into CUDA graphs (0: they read
	// the eager rows), as `symmem doctor` prints.
	GraphRows int            `json:"graph_rows"`
	Builtin   *autoTableJSON `json:"builtin,omitempty"`
}

func toAutoTableJSON(a doctor.AutoTable) *autoTableJSON {
	j := &autoTableJSON{Source: a.Source, From: a.From, Sources: a.Sources, Machine: a.Machine, Date: a.Date,
		Command: a.Command, Note: a.Note, GraphRows: a.GraphRows}
	if j.Sources == nil {
		j.Sources = []string{}
	}
	if a.Builtin != nil {
		j.Builtin = toAutoTableJSON(*a.Builtin)
	}
	return j
}

type groupJSON struct {
	Name   string `json:"name"`
	Ranks  []int  `json:"ranks"`
	Member bool   `json:"member"`
	Rank   int    `json:"rank"`
}

type opJSON struct {
	Op        string   `json:"op"`
	Bytes     int64    `json:"bytes"`
	Symmetric bool     `json:"symmetric"`
	Path      pathJSON `json:"path"`
}

//export symmem_doctor
func symmem_doctor(wh C.uint64_t, buf *C.char, capacity C.size_t) C.int {
	w, err := lookup[*world](uint64(wh), "world")
	if err != nil {
		return fail(err)
	}
	r := w.w.Doctor()
	d := doctorJSON{Backend: r.Backend, Why: r.Why, Detail: r.Detail, Rank: r.Rank, Size: r.Size, LocalRank: r.LocalRank, LocalSize: r.LocalSize,
		JobID: r.JobID, TimeoutSec: r.Timeout.Seconds(), Checked: r.Checked, Staging: r.Staging, Pool: r.Pool,
		Machine: r.Machine, AutoTable: toAutoTableJSON(r.AutoTable)}
	for _, g := range r.Groups {
		d.Groups = append(d.Groups, groupJSON{Name: g.Name, Ranks: g.Ranks, Member: g.Member, Rank: g.Rank})
	}
	for _, p := range r.Paths {
		d.Paths = append(d.Paths, opJSON{Op: p.Kind.String(), Bytes: p.Bytes, Symmetric: p.Symmetric, Path: toPathJSON(p.Path)})
	}
	return putJSON(buf, capacity, d)
}
