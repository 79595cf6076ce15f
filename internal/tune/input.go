package tune

import (
	"encoding/json"
	"fmt"

	"github.com/symmem/symmem/coll"
)

// Measurement is one path timed at one point.
type Measurement struct {
	Op      coll.Kind
	Class   Class
	Ranks   int
	InPlace bool
	Bytes   int64 // nccl-tests' size
	Algo    coll.Algo
	TimeUs  float64
	Graph   bool // timed as CUDA-graph replays (bench -G): builds GraphRows
}

// Input is one file the table is built from: measurements (a bench report)
// or a seed table (rows to keep where nothing is measured).
type Input struct {
	Name         string
	Machine      Machine
	Date         string
	Command      string
	Measurements []Measurement
	Seed         *Table
}

// benchReport is what Build reads of a `symmem bench -J` report (bench's
// Report, schema version 2; bench itself is above the backends, which read
// this package, so its layout is mirrored here and a test checks the two
// agree).
type benchReport struct {
	Schema    int    `json:"schema_version"`
	Backend   string `json:"backend"`
	Ranks     int    `json:"ranks"`
	DType     string `json:"dtype"`
	Symmetric bool   `json:"symmetric"`
	Offset    int64  `json:"offset"`
	Date      string `json:"date"`
	Command   string `json:"command"`
	Machine   *struct {
		GPU    string `json:"gpu"`
		Count  int    `json:"count"`
		Link   string `json:"link"`
		Driver string `json:"driver"`
		NCCL   string `json:"nccl"`
	} `json:"machine"`
	Results []struct {
		Op         string        `json:"op"`
		Algo       string        `json:"algo"`
		Bytes      int64         `json:"bytes"`
		OutOfPlace *benchMeasure `json:"out_of_place"`
		InPlace    *benchMeasure `json:"in_place"`
	} `json:"results"`
}

type benchMeasure struct {
	TimeUs  float64 `json:"time_us"`
	Wrong   int64   `json:"wrong"`
	Refused string  `json:"refused"`
	Graph   int     `json:"graph_calls"`
}

// benchSchema is the bench report schema version Build reads.
const benchSchema = 2

// ReadInput decodes one input file: a bench report (it has
// "schema_version") or a table (it has "format"), used as a seed.
func ReadInput(name string, data []byte) (Input, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return Input{}, fmt.Errorf("%s: %w", name, err)
	}
	if _, ok := probe["format"]; ok {
		t, err := Parse(data)
		if err != nil {
			return Input{}, fmt.Errorf("%s: %w", name, err)
		}
		return Input{Name: name, Machine: t.Machine, Date: t.Date, Command: t.Command, Seed: t}, nil
	}
	if _, ok := probe["schema_version"]; !ok {
		return Input{}, fmt.Errorf("%s: neither a bench report (schema_version) nor an auto table (format)", name)
	}
	var r benchReport
	if err := json.Unmarshal(data, &r); err != nil {
		return Input{}, fmt.Errorf("%s: %w", name, err)
	}
	switch {
	case r.Schema != benchSchema:
		return Input{}, fmt.Errorf("%s: bench schema version %d, this symmem reads %d: measure again with this build (`symmem bench -J` or `symmem tune`)", name, r.Schema, benchSchema)
	case !r.Symmetric:
		return Input{}, fmt.Errorf("%s: measured on ordinary buffers (--plain); auto's table is measured on symmetric ones", name)
	case r.Offset != 0:
		return Input{}, fmt.Errorf("%s: measured on buffers %d bytes past their aligned starts (--offset); auto's table is measured on aligned ones", name, r.Offset)
	case r.Ranks < 1:
		return Input{}, fmt.Errorf("%s: the report says %d ranks, want 1 or more (a `symmem bench -J` report names the ranks it ran on)", name, r.Ranks)
	}
	dt, err := coll.ParseDType(r.DType)
	if err != nil {
		return Input{}, fmt.Errorf("%s: %w", name, err)
	}
	in := Input{Name: name, Date: r.Date, Command: r.Command, Machine: Machine{Backend: r.Backend}}
	if m := r.Machine; m != nil {
		in.Machine = Machine{Backend: r.Backend, GPU: m.GPU, Count: m.Count, Link: m.Link, Driver: m.Driver, NCCL: m.NCCL}
	}
	for i, res := range r.Results {
		a := coll.Algo(res.Algo)
		if a == coll.AlgoAuto {
			continue // auto is not a path: it is what the table decides
		}
		op, err := coll.ParseKind(res.Op)
		if err != nil {
			return Input{}, fmt.Errorf("%s: result %d: %w", name, i, err)
		}
		for _, p := range []struct {
			m  *benchMeasure
			in bool
		}{{res.OutOfPlace, false}, {res.InPlace, true}} {
			// A refused call has no time; a path that gave wrong
			// results never wins.
			if p.m == nil || p.m.Refused != "" || p.m.Wrong != 0 || p.m.TimeUs <= 0 {
				continue
			}
			for _, c := range classesOf(op, dt) {
				in.Measurements = append(in.Measurements, Measurement{Op: op, Class: c, Ranks: r.Ranks, InPlace: p.in,
					Bytes: res.Bytes, Algo: a, TimeUs: p.m.TimeUs, Graph: p.m.Graph > 0})
			}
		}
	}
	return in, nil
}

// classesOf is the dtype classes a measurement of op on dt stands for:
// all-gather, broadcast and all-to-all move bytes (no path looks at the
// type; their units and rules go by bytes and alignment), so one type
// measures every class; reductions stand for their own class.
func classesOf(op coll.Kind, dt coll.DType) []Class {
	if op == coll.AllGather || op == coll.Broadcast || op == coll.AllToAll {
		return []Class{F16, F32, Other}
	}
	return []Class{ClassOf(dt)}
}
