package tune

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/symmem/symmem/coll"
)

// Tie is how close two paths' times must be for the preference order to
// decide between them: within 3% of the fastest.
const Tie = 0.03

// Preference is the order in which paths win a tie (Tie): coll's (AlgoInfo.Tie
// says why); any other path (the CPU's direct) last.
var Preference = func() []coll.Algo {
	as := slices.DeleteFunc(coll.AlgoTable(), func(a coll.AlgoInfo) bool { return a.Tie == 0 })
	slices.SortFunc(as, func(x, y coll.AlgoInfo) int { return x.Tie - y.Tie })
	out := make([]coll.Algo, len(as))
	for i, a := range as {
		out[i] = a.Algo
	}
	return out
}()

func prefRank(a coll.Algo) int {
	if i := slices.Index(Preference, a); i >= 0 {
		return i
	}
	return len(Preference)
}

// concrete is a key without wildcards in class and placement.
type concrete struct {
	op    coll.Kind
	class Class // F16, F32 or Other
	place Place // OutOfPlace or InPlace
}

// span is rows over a rank range for one concrete key.
type span struct {
	ranks Ranks
	rows  []Row // UpTo and Algo only
}

// Build makes a table's rows from inputs. The rule, per op, dtype class,
// rank count and placement:
//
//  1. At each measured size the fastest path wins; among paths within Tie
//     (3%) of the fastest, the previous (smaller) size's winner stays if
//     it is one of them (fewer switches, none slower than Tie), else
//     Preference decides (coll's tie order). A refused call or one with
//     wrong elements is not a candidate; auto's own rows are ignored.
//  2. Consecutive sizes with the same winner merge into one row bounded by
//     the largest of them (a size between two measured ones takes the
//     larger one's winner); the last row has no bound.
//  3. Measurements on n ranks stand for Bucket(n) (2, 3-4, 5-8, ...); two
//     rank counts of one bucket are an error.
//  4. Seed tables fill what nothing measured covers: their rows, cut to the
//     rank counts, classes and placements without measurements (earlier
//     inputs first).
//  5. Keys with the same rows are written once: one row set for every
//     class and placement, else one per placement, else per class (one
//     for both placements where they agree).
//
// Build uses the eager measurements (and seeds' Rows); BuildGraph the
// graph replays (and seeds' GraphRows).
func Build(inputs []Input) ([]Row, error) { return build(inputs, false) }

// BuildGraph is Build for Table.GraphRows: from the measurements of CUDA
// graph replays, by the same rules, except that the last row of a key
// keeps its bound (the largest size replayed): above it a captured call
// takes the eager rows' answer, measured there.
func BuildGraph(inputs []Input) ([]Row, error) { return build(inputs, true) }

func build(inputs []Input, graph bool) ([]Row, error) {
	got := map[concrete][]span{}
	// 1-3: measurements.
	type point struct {
		c     concrete
		ranks Ranks
	}
	times := map[point]map[int64]map[coll.Algo]float64{}
	counts := map[point]int{}
	for _, in := range inputs {
		for _, m := range in.Measurements {
			if m.Graph != graph {
				continue
			}
			place := OutOfPlace
			if m.InPlace {
				place = InPlace
			}
			p := point{concrete{m.Op, m.Class, place}, Bucket(m.Ranks)}
			if n, ok := counts[p]; ok && n != m.Ranks {
				return nil, fmt.Errorf("%s: %v %s on %d ranks and on %d: both stand for ranks %s; keep one", in.Name, m.Op, m.Class, n, m.Ranks, p.ranks)
			}
			counts[p] = m.Ranks
			if times[p] == nil {
				times[p] = map[int64]map[coll.Algo]float64{}
			}
			if times[p][m.Bytes] == nil {
				times[p][m.Bytes] = map[coll.Algo]float64{}
			}
			if t, ok := times[p][m.Bytes][m.Algo]; !ok || m.TimeUs < t {
				times[p][m.Bytes][m.Algo] = m.TimeUs
			}
		}
	}
	for p, bySize := range times {
		sizes := make([]int64, 0, len(bySize))
		for s := range bySize {
			sizes = append(sizes, s)
		}
		slices.Sort(sizes)
		var rows []Row
		for _, s := range sizes {
			var prev coll.Algo
			if n := len(rows); n > 0 {
				prev = rows[n-1].Algo
			}
			w := winner(bySize[s], prev)
			if n := len(rows); n > 0 && rows[n-1].Algo == w {
				rows[n-1].UpTo = s
				continue
			}
			rows = append(rows, Row{UpTo: s, Algo: w})
		}
		if !graph {
			rows[len(rows)-1].UpTo = 0
		}
		got[p.c] = append(got[p.c], span{p.ranks, rows})
	}
	// 4: seeds, where nothing is measured.
	for _, in := range inputs {
		if in.Seed == nil {
			continue
		}
		seed := in.Seed.Rows
		if graph {
			seed = in.Seed.GraphRows
		}
		for _, sr := range seedSpans(seed) {
			for _, r := range subtract(sr.ranks, got[sr.c]) {
				got[sr.c] = append(got[sr.c], span{r, sr.rows})
			}
		}
	}
	return compact(got), nil
}

// winner is the fastest path of times; within Tie of it, prev (the
// previous size's winner, "" for none) if it is there, else the most
// preferred.
func winner(times map[coll.Algo]float64, prev coll.Algo) coll.Algo {
	best := math.Inf(1)
	for _, t := range times {
		best = min(best, t)
	}
	if t, ok := times[prev]; ok && t <= best*(1+Tie) {
		return prev
	}
	var w coll.Algo
	for a, t := range times {
		if t > best*(1+Tie) {
			continue
		}
		if w == "" || prefRank(a) < prefRank(w) || (prefRank(a) == prefRank(w) && (t < times[w] || (t == times[w] && a < w))) {
			w = a
		}
	}
	return w
}

type seedSpan struct {
	c     concrete
	ranks Ranks
	rows  []Row
}

// seedSpans expands a table's keys (of rows) to concrete classes and
// placements.
func seedSpans(rows []Row) []seedSpan {
	var out []seedSpan
	byKey := map[key][]Row{}
	var keys []key
	for _, r := range rows {
		k := r.key()
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], Row{UpTo: r.UpTo, Algo: r.Algo})
	}
	for _, k := range keys {
		for _, c := range []Class{F16, F32, Other} {
			for _, p := range []Place{OutOfPlace, InPlace} {
				if k.class.matches(c) && (k.place == AnyPlace || k.place == p) {
					out = append(out, seedSpan{concrete{k.op, c, p}, k.ranks, byKey[k]})
				}
			}
		}
	}
	return out
}

// subtract is r without the rank ranges of have.
func subtract(r Ranks, have []span) []Ranks {
	parts := []Ranks{r}
	for _, h := range have {
		var next []Ranks
		for _, p := range parts {
			if !p.overlaps(h.ranks) {
				next = append(next, p)
				continue
			}
			if p.Min < h.ranks.Min {
				next = append(next, Ranks{p.Min, h.ranks.Min - 1})
			}
			if h.ranks.Max != 0 && p.hi() > h.ranks.Max {
				next = append(next, Ranks{h.ranks.Max + 1, p.Max})
			}
		}
		parts = next
	}
	return parts
}

// compact writes the spans as rows, each row set once for the widest
// wildcard whose keys all have it, ordered by op, rank range, class,
// placement and size.
func compact(got map[concrete][]span) []Row {
	type opRanks struct {
		op    coll.Kind
		ranks Ranks
	}
	sets := map[opRanks]map[concrete][]Row{}
	for c, spans := range got {
		for _, s := range spans {
			k := opRanks{c.op, s.ranks}
			if sets[k] == nil {
				sets[k] = map[concrete][]Row{}
			}
			sets[k][c] = s.rows
		}
	}
	var out []Row
	for k, set := range sets {
		add := func(rows []Row) {
			for _, r := range rows {
				r.Op, r.Ranks = k.op, k.ranks
				out = append(out, r)
			}
		}
		// One row set for every class and placement, else one per
		// placement, else per class: one for both placements where they
		// agree, else one each.
		if rows, ok := partition(set, k.op, []key{{class: AnyClass, place: AnyPlace}}); ok {
			add(rows)
			continue
		}
		if rows, ok := partition(set, k.op, []key{{class: AnyClass, place: OutOfPlace}, {class: AnyClass, place: InPlace}}); ok {
			add(rows)
			continue
		}
		for _, c := range []Class{F16, F32, Other} {
			rows, ok := partition(set, k.op, []key{{class: c, place: AnyPlace}})
			if !ok {
				rows, _ = partition(set, k.op, []key{{class: c, place: OutOfPlace}, {class: c, place: InPlace}})
			}
			add(rows)
		}
	}
	slices.SortStableFunc(out, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.Op, b.Op), cmp.Compare(a.Ranks.Min, b.Ranks.Min), cmp.Compare(a.Ranks.hi(), b.Ranks.hi()),
			cmp.Compare(a.Class, b.Class), cmp.Compare(a.Place, b.Place))
	})
	return out
}

// partition writes set's rows under the keys of part when every concrete
// key a part covers has the same rows (or none, where nothing is known);
// it fails when two covered keys differ, or when a part would claim a
// concrete key set lacks while covering one it has (a wildcard must not
// invent rows for an unmeasured dtype class that a seed did not cover).
func partition(set map[concrete][]Row, op coll.Kind, part []key) ([]Row, bool) {
	var out []Row
	for _, p := range part {
		var rows []Row
		covered, missing := 0, 0
		for _, c := range []Class{F16, F32, Other} {
			for _, pl := range []Place{OutOfPlace, InPlace} {
				if !p.class.matches(c) || !(p.place == AnyPlace || p.place == pl) {
					continue
				}
				r, ok := set[concrete{op, c, pl}]
				if !ok {
					missing++
					continue
				}
				covered++
				if rows == nil {
					rows = r
				} else if !slices.Equal(rows, r) {
					return nil, false
				}
			}
		}
		if covered == 0 {
			continue
		}
		if missing > 0 && (p.class == AnyClass || p.place == AnyPlace) {
			return nil, false
		}
		for _, r := range rows {
			r.Class, r.Place = p.class, p.place
			out = append(out, r)
		}
	}
	return out, true
}

// mergeMachines describes the machines of several inputs as one: a field
// they agree on is kept, differing ones are joined with " / "; Count is
// the largest.
func mergeMachines(ms []Machine) Machine {
	var out Machine
	join := func(dst *string, v string) {
		// v may be joined already (a seed table built from several
		// machines): each of its parts once.
		for _, p := range strings.Split(v, " / ") {
			if p == "" || slices.Contains(strings.Split(*dst, " / "), p) {
				continue
			}
			if *dst == "" {
				*dst = p
			} else {
				*dst += " / " + p
			}
		}
	}
	for _, m := range ms {
		join(&out.Backend, m.Backend)
		join(&out.GPU, m.GPU)
		join(&out.Link, m.Link)
		join(&out.Driver, m.Driver)
		join(&out.NCCL, m.NCCL)
		out.Count = max(out.Count, m.Count)
	}
	return out
}

// NewTable builds a table from inputs (Build), with the inputs' machines,
// the latest of their dates, and command and sources as given.
func NewTable(inputs []Input, command string, sources []string) (*Table, error) {
	rows, err := Build(inputs)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("tune: the inputs measured no path (every call refused, or wrong)")
	}
	graphRows, err := BuildGraph(inputs)
	if err != nil {
		return nil, err
	}
	t := &Table{Format: FormatVersion, Command: command, Sources: sources, Rows: rows, GraphRows: graphRows}
	var ms []Machine
	var notes []string
	for _, in := range inputs {
		ms = append(ms, in.Machine)
		t.Date = max(t.Date, in.Date)
		if in.Seed != nil && in.Seed.Note != "" {
			notes = append(notes, in.Name+": "+in.Seed.Note)
		}
	}
	t.Machine = mergeMachines(ms)
	t.Note = strings.Join(notes, "; ")
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("tune: the built table: %w", err)
	}
	return t, nil
}
