package plan

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current generators")

type variant struct {
	name string
	spec Spec // N and Rank filled in per case
}

var variants = []variant{
	{"all_gather", Spec{Kind: coll.AllGather, Count: 5, DType: coll.Float32}},
	{"all_gather_inplace", Spec{Kind: coll.AllGather, Count: 5, DType: coll.Float32, Options: Options{InPlace: true}}},
	{"all_gather_chunks2", Spec{Kind: coll.AllGather, Count: 5, DType: coll.Float32, Options: Options{Chunks: 2}}},
	{"reduce_scatter", Spec{Kind: coll.ReduceScatter, Count: 5, DType: coll.BFloat16, Op: coll.Sum}},
	{"reduce_scatter_inplace", Spec{Kind: coll.ReduceScatter, Count: 5, DType: coll.BFloat16, Op: coll.Avg, Options: Options{InPlace: true}}},
	{"all_reduce", Spec{Kind: coll.AllReduce, Count: 7, DType: coll.Float32, Op: coll.Sum}},
	{"all_reduce_inplace_chunks2", Spec{Kind: coll.AllReduce, Count: 7, DType: coll.Float32, Op: coll.Max, Options: Options{InPlace: true, Chunks: 2}}},
	{"all_reduce_oneshot", Spec{Kind: coll.AllReduce, Count: 7, DType: coll.Int32, Op: coll.Sum, Options: Options{OneShot: true}}},
	{"all_reduce_oneshot_inplace", Spec{Kind: coll.AllReduce, Count: 7, DType: coll.Int32, Op: coll.Min, Options: Options{OneShot: true, InPlace: true}}},
	{"broadcast_root1", Spec{Kind: coll.Broadcast, Count: 6, DType: coll.Float16, Root: 1}},
	{"all_to_all", Spec{Kind: coll.AllToAll, Count: 3, DType: coll.Int32}},
}

func buildAll(t *testing.T, s Spec, n int) []Plan {
	t.Helper()
	plans := make([]Plan, n)
	for r := range n {
		s.N, s.Rank = n, r
		p, err := Build(s)
		if err != nil {
			t.Fatalf("Build(%+v): %v", s, err)
		}
		plans[r] = p
	}
	if err := ValidateGroup(plans); err != nil {
		t.Fatalf("ValidateGroup: %v", err)
	}
	return plans
}

// TestGolden compares the printed plans of every rank for n = 2, 3, 4 with
// testdata/<variant>.golden. Run `go test ./internal/backend/shm/plan -run Golden -update`
// after an intended change and review the diff.
func TestGolden(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			var b strings.Builder
			for _, n := range []int{2, 3, 4} {
				if v.spec.Kind == coll.Broadcast && v.spec.Root >= n {
					continue
				}
				for _, p := range buildAll(t, v.spec, n) {
					b.WriteString(p.String())
					b.WriteString("\n")
				}
			}
			path := filepath.Join("testdata", v.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/backend/shm/plan -run Golden -update to create it)", err)
			}
			if got := b.String(); got != string(want) {
				t.Errorf("%s differs from the generated plans; first difference:\n%s", path, firstDiff(got, string(want)))
			}
		})
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n got: %s\nwant: %s", i+1, a, b)
		}
	}
	return "(none)"
}

func TestBuildRejectsBadSpecs(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Spec
		want string
	}{
		{"n=0", Spec{Kind: coll.AllGather, N: 0}, "group size"},
		{"rank", Spec{Kind: coll.AllGather, N: 2, Rank: 2}, "rank out of range"},
		{"count", Spec{Kind: coll.AllGather, N: 2, Count: -1}, "negative count"},
		{"dtype", Spec{Kind: coll.AllGather, N: 2, DType: 42}, "unknown dtype"},
		{"kind", Spec{Kind: 9, N: 2}, "unknown kind"},
		{"op", Spec{Kind: coll.AllReduce, N: 2, Op: 9}, "unknown reduction"},
		{"root", Spec{Kind: coll.Broadcast, N: 2, Root: 3}, "root 3"},
		{"oneshot", Spec{Kind: coll.AllGather, N: 2, Options: Options{OneShot: true}}, "OneShot"},
		{"bcast in-place", Spec{Kind: coll.Broadcast, N: 2, Options: Options{InPlace: true}}, "InPlace"},
		{"a2a in-place", Spec{Kind: coll.AllToAll, N: 2, Options: Options{InPlace: true}}, "out of place only"},
		{"chunks", Spec{Kind: coll.AllGather, N: 2, Options: Options{Chunks: -1}}, "chunk"},
		{"huge", Spec{Kind: coll.AllGather, N: 2, Count: 1 << 62}, "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(tc.s)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
}

func TestStagesAndSingleRank(t *testing.T) {
	p, err := Build(Spec{Kind: coll.AllGather, N: 3, Count: 4, DType: coll.Float32, Options: Options{Chunks: 2}})
	if err != nil {
		t.Fatal(err)
	}
	// signal signal | wait wait | 6 copies (own, then peers') | signal signal wait wait
	want := [][2]int{{4, 10}}
	if got := p.Stages(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Stages = %v, want %v\n%v", got, want, p)
	}
	for _, k := range coll.Kinds() {
		p, err := Build(Spec{Kind: k, N: 1, Count: 3, DType: coll.Float32})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range p.Steps {
			if s.IsSync() {
				t.Fatalf("%v with one rank has a sync step: %v", k, p)
			}
		}
	}
}

func TestEpochHelpers(t *testing.T) {
	for _, tc := range []struct {
		word, target uint32
		want         bool
	}{
		{0, 1, false}, {1, 1, true}, {5, 3, true},
		{0, ^uint32(0), true},  // wrapped past the target
		{^uint32(0), 2, false}, // target wrapped, word not yet
		{1 << 31, 0, false},    // 2^31 apart: treated as behind
	} {
		if got := Reached(tc.word, tc.target); got != tc.want {
			t.Errorf("Reached(%d, %d) = %v, want %v", tc.word, tc.target, got, tc.want)
		}
	}
	if Target(^uint32(0)-1, 1) != 0 {
		t.Error("Target must wrap")
	}
}

// TestAllToAllV checks the split plans' shape: rank 1 of 3 with counts
// (rows send, columns receive) reads only the nonzero blocks at the
// packed offsets, and the barriers stay when nothing moves.
func TestAllToAllV(t *testing.T) {
	counts := [][]int64{{1, 2, 0}, {3, 0, 4}, {0, 5, 6}}
	p, err := AllToAllV(3, 1, coll.Int8, counts, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `plan all_to_all n=3 rank=1 dtype=int8 count=0 splits in=7 out=7 scratch=0 phases=2
  0 signal to=2 phase=0
  1 signal to=0 phase=0
  2 wait   from=2 phase=0
  3 wait   from=0 phase=0
  4 copy   in[2]+0 -> out[1]+2 5B
  5 copy   in[0]+1 -> out[1]+0 2B
  6 signal to=2 phase=1
  7 signal to=0 phase=1
  8 wait   from=2 phase=1
  9 wait   from=0 phase=1
`
	if got := p.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if pre := Prelude(3, 1); fmt.Sprint(pre) != fmt.Sprint(p.Steps[:len(pre)]) {
		t.Errorf("Prelude %v is not the plan's start %v", pre, p.Steps[:len(pre)])
	}
	zero, err := AllToAllV(3, 0, coll.Int8, [][]int64{{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}, Options{})
	if err != nil || zero.Phases != 2 || len(zero.Steps) != 8 {
		t.Errorf("an all-zero matrix: %v, %v; want both barriers and no data step", zero, err)
	}
	for _, bad := range [][][]int64{{{0, -1}, {0, 0}}, {{0, 0}}, {{0}, {0, 0}}} {
		if _, err := AllToAllV(2, 0, coll.Int8, bad, Options{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("AllToAllV(%v): %v, want ErrInvalid", bad, err)
		}
	}
}
