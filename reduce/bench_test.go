package reduce

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/symmem/symmem/coll"
)

// Bytes per op counts the bytes read and written over memory, so the
// reported MB/s is memory traffic: dst op= src reads dst and src and writes dst
// (3x); ReduceN over k sources reads k and writes 1 ((k+1)x). The copy
// benchmark (read 1 + write 1) is the memory-speed yardstick. The buffers
// are 4 MiB; REDUCE_BENCH_MIB=64 sets another size (in MiB).

var benchBytes = int64(4 << 20)

func BenchmarkCopy(b *testing.B) {
	dst, src := make([]byte, benchBytes), make([]byte, benchBytes)
	b.SetBytes(2 * benchBytes)
	for b.Loop() {
		copy(dst, src)
	}
}

// BenchmarkReduce: dst op= src for every dtype and op, through the
// vector kernels (impl=vec, what ReduceN runs) and the pure-Go loops (impl=go).
func BenchmarkReduce(b *testing.B) {
	for _, dt := range coll.DTypes() {
		for _, op := range []coll.ReduceOp{coll.Sum, coll.Min, coll.Max} {
			for _, vec := range []bool{true, false} {
				impl := "go"
				if vec {
					impl = "vec"
				}
				b.Run(fmt.Sprintf("%v/%v/impl=%s", dt, op, impl), func(b *testing.B) {
					dst, src := benchBuf(dt), [][]byte{benchBuf(dt)}
					b.SetBytes(3 * benchBytes)
					for b.Loop() {
						run(dst, append([][]byte{dst}, src...), dt, op, vec)
					}
				})
			}
		}
	}
}

func BenchmarkReduceN(b *testing.B) {
	for _, dt := range []coll.DType{coll.Float32, coll.BFloat16, coll.Float16} {
		for _, k := range []int{2, 4, 8} {
			b.Run(fmt.Sprintf("%v/k=%d", dt, k), func(b *testing.B) {
				dst := make([]byte, benchBytes)
				srcs := make([][]byte, k)
				for i := range srcs {
					srcs[i] = benchBuf(dt)
				}
				b.SetBytes(int64(k+1) * benchBytes)
				for b.Loop() {
					if err := ReduceN(dst, srcs, dt, coll.Sum); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkPairwise is what ReduceN replaces: k-1 separate passes of
// Into after a copy, for k = 4.
func BenchmarkPairwise(b *testing.B) {
	const k = 4
	dst := make([]byte, benchBytes)
	srcs := make([][]byte, k)
	for i := range srcs {
		srcs[i] = make([]byte, benchBytes)
	}
	b.SetBytes(int64(k+1) * benchBytes)
	for b.Loop() {
		copy(dst, srcs[0])
		for _, s := range srcs[1:] {
			_ = ReduceN(dst, [][]byte{dst, s}, coll.Float32, coll.Sum)
		}
	}
}

func init() {
	if os.Getenv("REDUCE_BENCH_MIB") != "" {
		n, _ := strconv.Atoi(os.Getenv("REDUCE_BENCH_MIB"))
		benchBytes = int64(n) << 20
	}
}

// benchBuf holds typical values (normal numbers of modest size), so 16-bit
// conversions take their common path.
func benchBuf(dt coll.DType) []byte {
	return randBuf(rand.New(rand.NewPCG(7, uint64(dt))), dt, int(benchBytes)/dt.Size(), false)
}
