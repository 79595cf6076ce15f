package shm

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/symmem/symmem/coll"
)

// BenchmarkCrew times one stage handed to a crew, back to back, in one
// process (no ranks, no signals): what sharing a stage costs and gains.
// "inline" runs every stage on the caller (one worker); "crewN" uses N
// workers (SHM_BENCH_WORKERS, default GOMAXPROCS) with splitFor's pieces.
// A GOMAXPROCS above N leaves Ps idle, as in a rank of a many-core host
// (16 Ps, 8 workers with 2 ranks). The tiny stage (2 pieces of
// 64 bytes) is the hand-off alone: publish, a helper takes a piece, the
// caller waits for it.
//
//	go test ./internal/backend/shm -run '^$' -bench Crew -cpu 2
func BenchmarkCrew(b *testing.B) {
	w := runtime.GOMAXPROCS(0)
	if v, err := strconv.Atoi(os.Getenv("SHM_BENCH_WORKERS")); err == nil && v > 0 {
		w = v
	}
	cur := splitFor(1)
	cur.workers = w
	tiny := cur
	tiny.inline, tiny.minPiece = 0, 64
	for _, c := range []struct {
		name  string
		bytes int
		s     split
	}{
		{"handoff/128B", 128, tiny},
		{"copy/256K", 256 << 10, cur},
		{"copy/512K", 512 << 10, cur},
		{"copy/1M", 1 << 20, cur},
		{"reduce/1M", 1 << 20, cur},
	} {
		for _, v := range []struct {
			name string
			s    split
		}{{"inline", split{workers: 1}}, {fmt.Sprintf("crew%d", w), c.s}} {
			b.Run(c.name+"/"+v.name, func(b *testing.B) {
				cr := newCrew(v.s)
				defer cr.stop()
				dst, a, s := make([]byte, c.bytes), make([]byte, c.bytes), make([]byte, c.bytes)
				t := task{dst: dst, srcs: [][]byte{a}}
				if c.name[:6] == "reduce" {
					t = task{dst: dst, srcs: [][]byte{a, s}, reduce: true}
				}
				ts := []task{t}
				for range 3 {
					if err := cr.run(ts, coll.Float32, coll.Sum); err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(int64(c.bytes))
				b.ResetTimer()
				for range b.N {
					if err := cr.run(ts, coll.Float32, coll.Sum); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
