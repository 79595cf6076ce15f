package tune

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
)

// graphJSON is benchJSON with every measurement marked as CUDA-graph
// replays of calls captured calls (bench -G).
func graphJSON(t *testing.T, ranks, calls int, dtype string, rows ...string) []byte {
	t.Helper()
	var rep map[string]any
	if err := json.Unmarshal(benchJSON(t, ranks, dtype, rows...), &rep); err != nil {
		t.Fatal(err)
	}
	for _, r := range rep["results"].([]any) {
		for _, p := range []string{"out_of_place", "in_place"} {
			if m, ok := r.(map[string]any)[p].(map[string]any); ok {
				m["graph_calls"] = calls
			}
		}
	}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestGraphRows: replays measured with -G build the table's graph rows
// (their last bound kept: the largest size replayed), eager measurements
// its rows; a captured call takes the graph rows' answer where they have
// one, else the eager one; the rows survive JSON and Go source.
func TestGraphRows(t *testing.T) {
	eager, err := ReadInput("ar.bfloat16.bench.json", benchJSON(t, 2, "bfloat16",
		"all_reduce kernel 1K 10 10", "all_reduce nccl-window 1K 11 11",
		"all_reduce kernel 1M 20 20", "all_reduce nccl-window 1M 30 30"))
	if err != nil {
		t.Fatal(err)
	}
	graph, err := ReadInput("ar.bfloat16.graph.bench.json", graphJSON(t, 2, 20, "bfloat16",
		"all_reduce kernel 1K 10 10", "all_reduce nccl-window 1K 4 4",
		"all_reduce kernel 64K 12 12", "all_reduce nccl-window 64K 6 6"))
	if err != nil {
		t.Fatal(err)
	}
	if !graph.Measurements[0].Graph || eager.Measurements[0].Graph {
		t.Fatalf("graph_calls not read: graph %+v, eager %+v", graph.Measurements[0], eager.Measurements[0])
	}
	tb, err := NewTable([]Input{eager, graph}, "symmem tune -G 20", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rowsString(tb.Rows), "all_reduce 16-bit-float 2 any - kernel\n"; got != want {
		t.Errorf("rows:\n%s\nwant:\n%s", got, want)
	}
	if got, want := rowsString(tb.GraphRows), "all_reduce 16-bit-float 2 any 64K nccl-window\n"; got != want {
		t.Errorf("graph rows:\n%s\nwant:\n%s", got, want)
	}
	if !tb.HasGraphRows() {
		t.Error("HasGraphRows: false")
	}
	for _, tt := range []struct {
		op    coll.Kind
		graph bool
		total int64
		want  coll.Algo // "" no row
	}{
		{coll.AllReduce, true, 1 << 10, coll.AlgoNCCLWindow},
		{coll.AllReduce, true, 64 << 10, coll.AlgoNCCLWindow},
		{coll.AllReduce, true, 64<<10 + 1, coll.AlgoKernel}, // above the largest replay: the eager rows
		{coll.AllReduce, false, 1 << 10, coll.AlgoKernel},
		{coll.ReduceScatter, true, 1 << 10, ""}, // neither has the op
	} {
		got, ok := tb.Pick(tt.op, coll.BFloat16, 2, false, tt.graph, tt.total)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("Pick(%v, graph=%v, %d) = %q, %v; want %q", tt.op, tt.graph, tt.total, got, ok, tt.want)
		}
	}

	data, err := tb.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "\"graph_rows\": [\n    {\"op\":\"all_reduce\"") {
		t.Errorf("graph rows not one a line:\n%s", data)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if !slices.Equal(back.Rows, tb.Rows) || !slices.Equal(back.GraphRows, tb.GraphRows) || !back.HasGraphRows() {
		t.Errorf("round trip: rows %v graph rows %v, want %v and %v", back.Rows, back.GraphRows, tb.Rows, tb.GraphRows)
	}
	src, err := GoSource(tb, "cuda", "builtinTable")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "GraphRows: []tune.Row{\n\t\t{Op: coll.AllReduce, Class: tune.F16, Ranks: tune.Ranks{Min: 2, Max: 2}, Place: tune.AnyPlace, UpTo: 64 << 10, Algo: coll.AlgoNCCLWindow},") {
		t.Errorf("source lacks the graph rows:\n%s", src)
	}

	// Without graph rows a table says so (auto then never asks whether a
	// call is captured), and a bad graph row is named as one.
	plain := table(t, "all_reduce any 2 any - kernel")
	if err := plain.Validate(); err != nil || plain.HasGraphRows() {
		t.Errorf("a table without graph rows: %v, HasGraphRows %v", err, plain.HasGraphRows())
	}
	plain.GraphRows = []Row{row(t, "all_reduce any 2 any 1K auto")}
	if err := plain.Validate(); err == nil || !strings.Contains(err.Error(), "graph row 0") {
		t.Errorf("a bad graph row: %v", err)
	}
}

// TestGraphRowsOtherRankCount: graph rows measured on one rank count do
// not answer captured calls on a rank count the eager rows measured: there
// the eager rows' measurement is the one of this group's size (the
// built-in table's graph rows, measured on 2 H100, started captured
// 4-rank all-gathers from ll, which no 4-rank run measured, over the
// 4-rank rows' nccl-window). Where the eager rows hold no nearer rank
// range, the graph rows still answer.
func TestGraphRowsOtherRankCount(t *testing.T) {
	eager2, err := ReadInput("ag2.bfloat16.bench.json", benchJSON(t, 2, "bfloat16",
		"all_gather ll 1K 5 5", "all_gather nccl-window 1K 10 10"))
	if err != nil {
		t.Fatal(err)
	}
	graph2, err := ReadInput("ag2.bfloat16.graph.bench.json", graphJSON(t, 2, 20, "bfloat16",
		"all_gather ll 1K 3 3", "all_gather nccl-window 1K 4 4"))
	if err != nil {
		t.Fatal(err)
	}
	eager4, err := ReadInput("ag4.bfloat16.bench.json", benchJSON(t, 4, "bfloat16",
		"all_gather kernel 1K 20 20", "all_gather nccl-window 1K 10 10"))
	if err != nil {
		t.Fatal(err)
	}
	tb, err := NewTable([]Input{eager2, graph2, eager4}, "symmem tune -G 20", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		n     int
		graph bool
		want  coll.Algo
	}{
		{"captured, 2 ranks: graph rows", 2, true, coll.AlgoLL},
		{"eager, 2 ranks", 2, false, coll.AlgoLL},
		{"eager, 4 ranks", 4, false, coll.AlgoNCCLWindow},
		{"captured, 4 ranks: the 4-rank rows, not 2-rank graph rows", 4, true, coll.AlgoNCCLWindow},
		{"captured, 3 ranks: the 3-4 rows", 3, true, coll.AlgoNCCLWindow},
		{"captured, 8 ranks: the nearest below is 3-4's rows", 8, true, coll.AlgoNCCLWindow},
		{"captured, 1 rank: nearest above, graph rows and rows alike (2)", 1, true, coll.AlgoLL},
	} {
		got, ok := tb.Pick(coll.AllGather, coll.BFloat16, tt.n, false, tt.graph, 1<<10)
		if !ok || got != tt.want {
			t.Errorf("%s: Pick = %q, %v; want %s\nrows:\n%sgraph rows:\n%s", tt.name, got, ok, tt.want, rowsString(tb.Rows), rowsString(tb.GraphRows))
		}
	}
}
