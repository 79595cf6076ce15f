// Package doctor holds what World.Doctor returns: the state of one rank of a
// job (backend, ranks, groups, pool) and the path each op and size would take
// on the world group, and why. `symmem doctor` prints it as a table and the C
// ABI's symmem_doctor (python's symmem.doctor()) as JSON.
//
// The types live here rather than in package symmem so that the user API's
// root stays narrow: a program that runs collectives never names them.
package doctor

import (
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/pool"
)

// Report is what `symmem doctor` prints: the state of this rank and the
// path each op and size would take.
type Report struct {
	Backend   string        // "cpu" or "cuda"
	Why       string        // why this backend (auto's choice)
	Detail    string        // the backend's own description (devices, links, groups)
	Rank      int           // world rank
	Size      int           // world size
	LocalRank int           // rank on this host
	LocalSize int           // ranks on this host
	JobID     string        // job id from the environment
	Timeout   time.Duration // bound on every wait
	Checked   bool          // cross-rank checking of every call
	Staging   int64         // staging buffer bytes per group (0: disabled)
	Groups    []Group       // in creation order, the world first
	Pool      pool.Stats    // the process's pool (in symmem_doctor's JSON as it is: pool.Stats' snake_case tags)
	Paths     []Path        // world group: every op × Sizes × {symmetric, ordinary}
	Machine   Machine       // this rank's machine, as auto tables record it
	AutoTable AutoTable     // the table auto reads, and where it came from
}

// Machine describes a machine the way auto tables record it.
// Its JSON form is symmem_doctor's "machine".
type Machine struct {
	Backend string `json:"backend"` // "cuda" or "cpu"
	GPU     string `json:"gpu"`     // device name
	Count   int    `json:"count"`   // GPUs visible on the host
	Link    string `json:"link"`    // "nvlink", "pcie", "none"
	Driver  string `json:"driver"`  // CUDA driver version
	NCCL    string `json:"nccl"`    // NCCL version ("" none loaded)
}

// AutoTable says which table `auto` reads and where it came from.
type AutoTable struct {
	// Source is "built-in" (generated from measurement files in the
	// repository, Sources), a file's path (Options.GPU.AutoTable or
	// SYMMEM_AUTO_TABLE, From says which), or "" when the backend reads
	// no table (the CPU backend's auto has one path; Note says so).
	Source  string
	From    string
	Sources []string // the measurement files it was built from
	Machine Machine  // where it was measured
	Date    string
	Command string // what produced it
	Note    string
	// GraphRows is how many rows answer calls captured into CUDA graphs
	// (tune.Table.GraphRows; 0: captured calls read the same rows).
	GraphRows int
	// Builtin is the built-in table, which answers calls a file's table
	// has no row for (nil unless Source is a file).
	Builtin *AutoTable
}

// Group describes one group from this rank's view.
type Group struct {
	Name   string
	Ranks  []int // world ranks of the members
	Member bool  // this rank belongs to it
	Rank   int   // this rank's group rank (-1 if not a member)
}

// Path is one line of the path table: the path a call of Kind moving Bytes
// (the full gathered / pre-reduction tensor) on symmetric or ordinary
// buffers would take, and why (World.Explain's answer).
type Path struct {
	Kind      coll.Kind
	Bytes     int64
	Symmetric bool
	Path      coll.Path
}

// Kinds are the ops the path table covers, in its order.
var Kinds = coll.Kinds()

// Sizes are the sizes the path table covers.
var Sizes = []int64{4 << 10, 1 << 20, 64 << 20}
