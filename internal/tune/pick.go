package tune

import (
	"fmt"
	"math"
	"slices"

	"github.com/symmem/symmem/coll"
)

// key is what a row is about, besides its size bound.
type key struct {
	op    coll.Kind
	class Class
	ranks Ranks
	place Place
}

func (r Row) key() key { return key{r.Op, r.Class, r.Ranks, r.Place} }

func (k key) String() string {
	return fmt.Sprintf("%v %s ranks %s %s", k.op, k.class, k.ranks, k.place)
}

// group is the rows of one key, ascending.
type group struct {
	key
	upTo []int64 // inclusive; math.MaxInt64 for no bound
	algo []coll.Algo
}

// index is a validated table arranged for Pick: the groups of each op.
type index struct {
	ops [coll.AllToAll + 1][]group
}

// Validate checks every row and builds the lookups: a known op, dtype
// class, placement and path (not auto); ranks from 1; the rows of one key
// (op, class, ranks, placement) ascending in size, only the last without a
// bound; no two keys overlapping (the same op, overlapping rank ranges,
// classes and placements that both cover some call). Rows and GraphRows
// are checked apart (a graph row answers other calls than an eager one);
// Rows may not be empty. Errors name the row (its index in its list, from
// 0).
func (t *Table) Validate() error {
	if t.Format != FormatVersion {
		return fmt.Errorf("auto table format version %d: this symmem reads version %d (re-run `symmem tune`)", t.Format, FormatVersion)
	}
	if len(t.Rows) == 0 {
		return fmt.Errorf("auto table: no rows")
	}
	idx, err := indexRows(t.Rows, "row")
	if err != nil {
		return err
	}
	gidx, err := indexRows(t.GraphRows, "graph row")
	if err != nil {
		return err
	}
	t.idx, t.gidx = idx, gidx
	return nil
}

// indexRows checks rows (Validate's rules) and arranges them for Pick;
// what names a row in errors ("row", "graph row"). No rows: nil.
func indexRows(rows []Row, what string) (*index, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	idx := &index{}
	first := map[key]int{} // the first row of each key
	for i, r := range rows {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("auto table %s %d (%s): %s", what, i, r, fmt.Sprintf(format, args...))
		}
		switch {
		case r.Op < coll.AllGather || r.Op > coll.AllToAll:
			return nil, bad("unknown op")
		case int(r.Class) >= len(classNames):
			return nil, bad("unknown dtype class")
		case int(r.Place) >= len(placeNames):
			return nil, bad("unknown placement")
		case r.Ranks.Min < 1 || (r.Ranks.Max != 0 && r.Ranks.Max < r.Ranks.Min):
			return nil, bad("rank range %d-%d", r.Ranks.Min, r.Ranks.Max)
		case r.UpTo < 0:
			return nil, bad("negative size bound %d", r.UpTo)
		case r.Algo == coll.AlgoAuto || !slices.Contains(coll.Algos(), r.Algo):
			return nil, bad("path %q: want one of %v other than auto", r.Algo, coll.Algos()[1:])
		}
		k := r.key()
		gs := idx.ops[r.Op]
		gi := slices.IndexFunc(gs, func(g group) bool { return g.key == k })
		if gi < 0 {
			for _, g := range gs {
				if g.ranks.overlaps(k.ranks) && (g.class.matches(k.class) || k.class.matches(g.class)) &&
					(g.place == AnyPlace || k.place == AnyPlace || g.place == k.place) {
					return nil, bad("overlaps %s %d (%s ranks %s %s): two rows would answer the same call", what, first[g.key], g.class, g.ranks, g.place)
				}
			}
			first[k] = i
			idx.ops[r.Op] = append(gs, group{key: k})
			gi = len(gs)
		}
		g := &idx.ops[r.Op][gi]
		up := r.UpTo
		if up == 0 {
			up = math.MaxInt64
		}
		if n := len(g.upTo); n > 0 {
			if g.upTo[n-1] == math.MaxInt64 {
				return nil, bad("follows a row of the same key without a size bound (only the last row of a key may have none)")
			}
			if up <= g.upTo[n-1] {
				return nil, bad("size bound not above the previous row's %s (rows of a key ascend)", coll.FormatSize(g.upTo[n-1]))
			}
		}
		g.upTo = append(g.upTo, up)
		g.algo = append(g.algo, r.Algo)
	}
	return idx, nil
}

// Must validates t and returns it; it panics on an invalid table (the
// built-in one, whose test checks it).
func Must(t *Table) *Table {
	if err := t.Validate(); err != nil {
		panic("tune: " + err.Error())
	}
	return t
}

// Pick is the path the table starts auto from for a call of op on
// dtype dt, n ranks, in place or not, moving total bytes, captured into a
// CUDA graph or not, and false when the table has no row for it (no row of
// that op, class and placement, or total above every bound). Among the
// keys that cover the call's class and placement it takes the one whose
// rank range holds n; failing that the nearest measured below n (the
// widest range under it), failing that the nearest above. A captured call
// takes GraphRows' answer where they have one and their key is as near n
// as Rows' (graph rows of 2 ranks do not answer for 4 where Rows measured
// 4), else Rows'. It allocates nothing (auto runs it on every call).
func (t *Table) Pick(op coll.Kind, dt coll.DType, n int, inPlace, graph bool, total int64) (coll.Algo, bool) {
	if t == nil || op < 0 || op > coll.AllToAll {
		return "", false
	}
	eager := t.idx.find(op, dt, n, inPlace)
	if graph {
		// Graph rows of a farther rank range than the eager rows' do not
		// answer: rows measured on this group's rank count (or nearer it)
		// say more about it than replays on another (graph rows from 2
		// ranks started captured 4-rank calls from a path no 4-rank run
		// measured).
		if g := t.gidx.find(op, dt, n, inPlace); g != nil && (eager == nil || !eager.ranks.nearer(g.ranks, n)) {
			if a, ok := g.answer(total); ok {
				return a, true
			}
		}
	}
	if eager == nil {
		return "", false
	}
	return eager.answer(total)
}

// HasGraphRows reports whether the table answers captured calls apart
// (GraphRows): without them auto need not ask whether a call is captured.
func (t *Table) HasGraphRows() bool { return t != nil && t.gidx != nil }

// find is the group of one row set (nil: none) that answers a call of op
// on dt, n ranks, in place or not (Pick's rule); nil where none does.
func (idx *index) find(op coll.Kind, dt coll.DType, n int, inPlace bool) *group {
	if idx == nil {
		return nil
	}
	class := ClassOf(dt)
	var in, below, above *group
	gs := idx.ops[op]
	for i := range gs {
		g := &gs[i]
		if !g.class.matches(class) || !g.place.matches(inPlace) {
			continue
		}
		switch {
		case g.ranks.contains(n):
			in = g
		case g.ranks.hi() < n:
			if below == nil || g.ranks.hi() > below.ranks.hi() {
				below = g
			}
		case above == nil || g.ranks.Min < above.ranks.Min:
			above = g
		}
		if in != nil {
			break
		}
	}
	g := in
	if g == nil {
		g = below
	}
	if g == nil {
		g = above
	}
	return g
}

// nearer reports whether rank range r is nearer n than o by Pick's rule:
// one holding n, else the nearest below n, else the nearest above.
func (r Ranks) nearer(o Ranks, n int) bool {
	dist := func(x Ranks) (int, int) {
		switch {
		case x.contains(n):
			return 0, 0
		case x.hi() < n:
			return 1, n - x.hi()
		}
		return 2, x.Min - n
	}
	rt, rd := dist(r)
	ot, od := dist(o)
	return rt < ot || (rt == ot && rd < od)
}

// answer is g's path for total bytes, false above its last bound.
func (g *group) answer(total int64) (coll.Algo, bool) {
	for i, up := range g.upTo {
		if total <= up {
			return g.algo[i], true
		}
	}
	return "", false
}

// Algos lists the paths the table names (each once, in order of first
// use; graph rows after the others).
func (t *Table) Algos() []coll.Algo {
	var out []coll.Algo
	for _, r := range slices.Concat(t.Rows, t.GraphRows) {
		if !slices.Contains(out, r.Algo) {
			out = append(out, r.Algo)
		}
	}
	return out
}
