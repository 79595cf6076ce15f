// Package tune is the table the GPU backend's `auto` reads: which path
// (algorithm) to start from per op, dtype class, rank count, placement and
// size. It holds the table's versioned format (Table, with a JSON encoding
// and Go source for the built-in table), its validation, its lookup (Pick)
// and how a table is built from measurements (Build, from `symmem bench -J`
// reports and seed tables). It is pure: no backend, no I/O beyond reading
// the files it is pointed at (ReadDir).
//
// The table says where auto starts; the rules that stay code (the fallback
// order when a path does not take a call, NCCL window verdicts, element-mode
// reductions, no NCCL on shared GPUs, non-symmetric buffers) are the
// backend's and apply after it (internal/backend/cuda/autotable.go).
package tune

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/symmem/symmem/coll"
)

// FormatVersion is the version of the table's layout; a table of another
// version is refused (Validate). It changes when a field changes meaning
// or goes away.
const FormatVersion = 1

// Table is one auto table: where it came from and its rows.
type Table struct {
	Format  int     `json:"format"`  // FormatVersion
	Machine Machine `json:"machine"` // where it was measured
	Date    string  `json:"date"`    // when (RFC 3339 date or time)
	// Command produced it (`symmem tune ...`, or the generator).
	Command string `json:"command"`
	// Sources are the measurement files it was built from.
	Sources []string `json:"sources,omitempty"`
	Note    string   `json:"note,omitempty"`
	Rows    []Row    `json:"rows"`
	// GraphRows answer calls captured into a CUDA graph, measured as graph
	// replays (`symmem tune -G`): there launch and host costs vanish and
	// the paths rank differently at small sizes. A call they do not cover
	// (no key, above the key's last bound, or a key of a rank range farther
	// from the call's rank count than Rows' key: Pick) takes Rows' answer.
	// Optional.
	GraphRows []Row `json:"graph_rows,omitempty"`

	idx, gidx *index // built by Validate
}

// Machine describes where a table was measured.
type Machine struct {
	Backend string `json:"backend"`          // "cuda" or "cpu"
	GPU     string `json:"gpu,omitempty"`    // device name, e.g. "NVIDIA H200"
	Count   int    `json:"count,omitempty"`  // GPUs visible on the host (the largest of the sources)
	Link    string `json:"link,omitempty"`   // "nvlink", "pcie" (peer access without NVLink atomics), "none"
	Driver  string `json:"driver,omitempty"` // CUDA driver version, e.g. "12.8"
	NCCL    string `json:"nccl,omitempty"`   // NCCL version, e.g. "2.28.9"
}

// String is a one-line description.
func (m Machine) String() string {
	var parts []string
	switch {
	case m.GPU != "" && m.Count > 0:
		parts = append(parts, fmt.Sprintf("%dx %s", m.Count, m.GPU))
	case m.GPU != "":
		parts = append(parts, m.GPU)
	default:
		parts = append(parts, "backend "+or(m.Backend, "unknown"))
	}
	if m.Link != "" {
		parts = append(parts, m.Link)
	}
	if m.Driver != "" {
		parts = append(parts, "driver "+m.Driver)
	}
	if m.NCCL != "" {
		parts = append(parts, "NCCL "+m.NCCL)
	}
	return strings.Join(parts, ", ")
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Row says which path auto starts from for calls of Op, of a dtype in
// Class, on a rank count in Ranks, in Place, whose total bytes (nccl-tests'
// "size": the gathered output of an all-gather, the input of a reduction)
// are at most UpTo and above the previous row's bound of the same key.
type Row struct {
	Op    coll.Kind `json:"-"`
	Class Class     `json:"-"`
	Ranks Ranks     `json:"-"`
	Place Place     `json:"-"`
	// UpTo is inclusive; 0 means no bound (only the last row of a key).
	UpTo int64     `json:"-"`
	Algo coll.Algo `json:"-"`
}

// rowJSON is Row's encoding: names, not enum values.
type rowJSON struct {
	Op    string `json:"op"`
	Class string `json:"dtype"`
	Ranks string `json:"ranks"`
	Place string `json:"placement"`
	UpTo  int64  `json:"up_to,omitempty"`
	Algo  string `json:"algo"`
}

func (r Row) MarshalJSON() ([]byte, error) {
	return json.Marshal(rowJSON{Op: r.Op.String(), Class: r.Class.String(), Ranks: r.Ranks.String(), Place: r.Place.String(),
		UpTo: r.UpTo, Algo: string(r.Algo)})
}

func (r *Row) UnmarshalJSON(b []byte) error {
	var j rowJSON
	// A misspelt key would drop a bound silently ("upto": every size), as
	// Parse refuses unknown keys above.
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&j); err != nil {
		return err
	}
	var err error
	if r.Op, err = coll.ParseKind(j.Op); err != nil {
		return fmt.Errorf("op: %w", err)
	}
	if r.Class, err = ParseClass(j.Class); err != nil {
		return err
	}
	if r.Ranks, err = ParseRanks(j.Ranks); err != nil {
		return err
	}
	if r.Place, err = ParsePlace(j.Place); err != nil {
		return err
	}
	r.UpTo, r.Algo = j.UpTo, coll.Algo(j.Algo)
	return nil
}

// String is the row as one line (error messages, doctor).
func (r Row) String() string {
	up := "no bound"
	if r.UpTo > 0 {
		up = "up to " + coll.FormatSize(r.UpTo)
	}
	return fmt.Sprintf("%v %s ranks %s %s %s -> %s", r.Op, r.Class, r.Ranks, r.Place, up, r.Algo)
}

// Class is a dtype class: the table distinguishes 16-bit floats, 32-bit
// floats and the rest.
type Class uint8

const (
	AnyClass Class = iota // every dtype
	F16                   // float16, bfloat16
	F32                   // float32
	Other                 // float64, the integers
)

var classNames = [...]string{AnyClass: "any", F16: "16-bit-float", F32: "32-bit-float", Other: "other"}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", c)
}

// ParseClass parses a Class name ("" is any).
func ParseClass(s string) (Class, error) {
	if s == "" {
		return AnyClass, nil
	}
	for i, n := range classNames {
		if n == s {
			return Class(i), nil
		}
	}
	return 0, fmt.Errorf("dtype class %q: want 16-bit-float, 32-bit-float, other or any", s)
}

// ClassOf is dt's class.
func ClassOf(dt coll.DType) Class {
	switch dt {
	case coll.Float16, coll.BFloat16:
		return F16
	case coll.Float32:
		return F32
	}
	return Other
}

// matches reports whether class c covers dtype class x.
func (c Class) matches(x Class) bool { return c == AnyClass || c == x }

// Place is a call's placement: out of place, in place, or either.
type Place uint8

const (
	AnyPlace Place = iota
	OutOfPlace
	InPlace
)

var placeNames = [...]string{AnyPlace: "any", OutOfPlace: "out", InPlace: "in"}

func (p Place) String() string {
	if int(p) < len(placeNames) {
		return placeNames[p]
	}
	return fmt.Sprintf("place(%d)", p)
}

// ParsePlace parses out, in or any ("" is any).
func ParsePlace(s string) (Place, error) {
	if s == "" {
		return AnyPlace, nil
	}
	for i, n := range placeNames {
		if n == s {
			return Place(i), nil
		}
	}
	return 0, fmt.Errorf("placement %q: want out, in or any", s)
}

func (p Place) matches(inPlace bool) bool {
	return p == AnyPlace || (p == InPlace) == inPlace
}

// Ranks is a range of rank counts, Min to Max inclusive; Max 0 is no
// bound. It is written "2", "3-4" or "5-" (five or more).
type Ranks struct{ Min, Max int }

func (r Ranks) String() string {
	switch {
	case r.Max == 0:
		return strconv.Itoa(r.Min) + "-"
	case r.Max == r.Min:
		return strconv.Itoa(r.Min)
	}
	return fmt.Sprintf("%d-%d", r.Min, r.Max)
}

// ParseRanks parses "2", "3-4" or "5-".
func ParseRanks(s string) (Ranks, error) {
	lo, hi, dash := strings.Cut(strings.TrimSpace(s), "-")
	var r Ranks
	var err error
	if r.Min, err = strconv.Atoi(lo); err != nil || r.Min < 1 {
		return Ranks{}, fmt.Errorf("ranks %q: want N, N-M or N- with N at least 1", s)
	}
	switch {
	case !dash:
		r.Max = r.Min
	case hi == "":
	default:
		if r.Max, err = strconv.Atoi(hi); err != nil || r.Max < r.Min {
			return Ranks{}, fmt.Errorf("ranks %q: want N, N-M (M at least N) or N-", s)
		}
	}
	return r, nil
}

func (r Ranks) hi() int {
	if r.Max == 0 {
		return math.MaxInt
	}
	return r.Max
}

func (r Ranks) contains(n int) bool { return n >= r.Min && n <= r.hi() }

func (r Ranks) overlaps(o Ranks) bool { return r.Min <= o.hi() && o.Min <= r.hi() }

// Bucket is the range of rank counts a measurement on n ranks stands for:
// 1, 2, 3-4, 5-8, 9-16, ...
func Bucket(n int) Ranks {
	if n <= 2 {
		return Ranks{n, n}
	}
	hi := 4
	for hi < n {
		hi *= 2
	}
	return Ranks{hi/2 + 1, hi}
}

// Parse decodes a table from JSON and validates it.
func Parse(data []byte) (*Table, error) {
	var t Table
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		var fe struct {
			Format int `json:"format"`
		}
		if json.Unmarshal(data, &fe) == nil && fe.Format != FormatVersion {
			return nil, fmt.Errorf("auto table format version %d: this symmem reads version %d (re-run `symmem tune`)", fe.Format, FormatVersion)
		}
		return nil, fmt.Errorf("auto table: %w", err)
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF { // a second table or junk after the first
		return nil, fmt.Errorf("auto table: more after the table's closing brace (a merge or an edit left it: one table per file)")
	}
	if err := duplicateKey(data); err != nil {
		return nil, fmt.Errorf("auto table: %w", err)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// duplicateKey reports a key given twice in one object of data's first
// value: encoding/json keeps the last silently ("rows" twice dropped the
// first list; "up_to" twice in a row, one bound), as it matches keys to
// fields without regard to case, so "algo" and "Algo" count as one key.
func duplicateKey(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var value func() error
	value = func() error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('['):
			for dec.More() {
				if err := value(); err != nil {
					return err
				}
			}
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				ks, _ := k.(string)
				if seen[strings.ToLower(ks)] {
					return fmt.Errorf("key %q twice in one object (a merge or an edit left it: the first would be ignored)", ks)
				}
				seen[strings.ToLower(ks)] = true
				if err := value(); err != nil {
					return err
				}
			}
		default:
			return nil
		}
		_, err = dec.Token() // the closing ] or }
		return err
	}
	return value()
}

// JSON encodes t, indented, one row a line.
func (t *Table) JSON() ([]byte, error) {
	c := *t
	c.Rows, c.GraphRows = nil, nil
	head, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, err
	}
	// Replace the empty rows with one row a line: diffs of tables read
	// as diffs of rows.
	var b strings.Builder
	i := strings.LastIndex(string(head), `"rows": null`)
	if i < 0 {
		return nil, errors.New("tune: encoding the table: rows key not found")
	}
	b.WriteString(string(head[:i]))
	if err := writeRows(&b, "rows", t.Rows); err != nil {
		return nil, err
	}
	if len(t.GraphRows) > 0 {
		b.WriteString(",\n  ")
		if err := writeRows(&b, "graph_rows", t.GraphRows); err != nil {
			return nil, err
		}
	}
	b.WriteString(string(head[i+len(`"rows": null`):]))
	b.WriteString("\n")
	return []byte(b.String()), nil
}

// writeRows writes "name": [rows], one row a line.
func writeRows(b *strings.Builder, name string, rows []Row) error {
	fmt.Fprintf(b, "%q: [", name)
	for j, r := range rows {
		rb, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if j > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n    ")
		b.Write(rb)
	}
	if len(rows) > 0 {
		b.WriteString("\n  ")
	}
	b.WriteString("]")
	return nil
}
