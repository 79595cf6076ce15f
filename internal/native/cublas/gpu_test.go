package cublas

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// gpuLib skips the test, saying why, unless a GPU and cuBLAS are usable.
func gpuLib(t *testing.T) (*Lib, *cudadrv.Context) {
	t.Helper()
	if err := cudadrv.Load(); err != nil {
		t.Skipf("no GPU: %v", err)
	}
	l, err := Load()
	if err != nil {
		t.Skipf("no cuBLAS: %v", err)
	}
	ctx, err := cudadrv.Retain(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctx.Release() })
	return l, ctx
}

// devAlloc maps bytes of device memory (VMM, rounded up to the
// granularity) for the test's lifetime.
func devAlloc(t *testing.T, ctx *cudadrv.Context, bytes int) uint64 {
	t.Helper()
	g, err := cudadrv.Granularity(ctx.Dev)
	if err != nil {
		t.Fatal(err)
	}
	size := (int64(bytes) + g - 1) / g * g
	a, err := cudadrv.Create(ctx, size)
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Map(ctx, g, []int{ctx.Dev})
	if err != nil {
		a.Release()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cudadrv.Unmap(ctx, p, size)
		a.Release()
	})
	return p
}

func bf16Bits(f float32) uint16  { return uint16(math.Float32bits(f) >> 16) } // exact for the values used
func bf16Float(b uint16) float64 { return float64(math.Float32frombits(uint32(b) << 16)) }

// TestGemmMatchesHost runs bf16 GEMMs with f32 accumulation on the GPU and
// compares every element with a float64 reference computed on the host
// from the same bf16 inputs, for f32 and bf16 outputs and both layouts of A.
func TestGemmMatchesHost(t *testing.T) {
	l, ctx := gpuLib(t)
	h, err := l.New(ctx.Handle())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.Close(); err != nil {
			t.Error(err)
		}
	}()
	v, err := h.Version()
	if err != nil && !errors.Is(err, errs.NotSupported) {
		t.Fatal(err)
	}
	t.Logf("%s, handle version %d", l, v)
	s, err := cudadrv.NewStream(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	if err := h.SetStream(s.Handle()); err != nil {
		t.Fatal(err)
	}
	const m, n, k = 96, 80, 272
	rng := rand.New(rand.NewPCG(1, 2))
	// Inputs: multiples of 1/64 in [-2, 2): exact in bf16, so the only
	// rounding is the accumulation (and the output's).
	host := func(count int) ([]uint16, []byte) {
		v := make([]uint16, count)
		b := make([]byte, 2*count)
		for i := range v {
			v[i] = bf16Bits(float32(rng.IntN(256)-128) / 64)
			binary.LittleEndian.PutUint16(b[2*i:], v[i])
		}
		return v, b
	}
	av, ab := host(m * k)
	bv, bb := host(k * n)
	dA, dB, dC := devAlloc(t, ctx, len(ab)), devAlloc(t, ctx, len(bb)), devAlloc(t, ctx, 4*m*n)
	if err := cudadrv.CopyHtoD(ctx, dA, ab); err != nil {
		t.Fatal(err)
	}
	if err := cudadrv.CopyHtoD(ctx, dB, bb); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		ta    Operation
		ctype DataType
	}{{"NN f32 out", OpN, R32F}, {"NN bf16 out", OpN, R16BF}, {"TN f32 out", OpT, R32F}} {
		t.Run(c.name, func(t *testing.T) {
			if err := cudadrv.Memset8(ctx, dC, 0xff, int64(4*m*n)); err != nil { // NaN garbage: stale output fails
				t.Fatal(err)
			}
			g := Gemm{TransA: c.ta, M: m, N: n, K: k, A: dA, B: dB, C: dC, AType: R16BF, BType: R16BF, CType: c.ctype, Alpha: 1}
			if err := h.Gemm(g); err != nil {
				t.Fatal(err)
			}
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			out := make([]byte, c.ctype.Size()*m*n)
			if err := cudadrv.CopyDtoH(ctx, out, dC); err != nil {
				t.Fatal(err)
			}
			// A is m×k column-major (lda = m) for OpN; for OpT the same
			// bytes are read as a k×m matrix (lda = k) and transposed.
			a := func(i, p int) float64 {
				if c.ta == OpT {
					return bf16Float(av[p+i*k])
				}
				return bf16Float(av[i+p*m])
			}
			bad := 0
			for j := 0; j < n; j++ {
				for i := 0; i < m; i++ {
					var ref, mag float64
					for p := 0; p < k; p++ {
						x := a(i, p) * bf16Float(bv[p+j*k])
						ref += x
						mag += math.Abs(x)
					}
					var got, tol float64
					if c.ctype == R32F {
						got = float64(math.Float32frombits(binary.LittleEndian.Uint32(out[4*(i+j*m):])))
						tol = 1e-5*mag + 1e-6
					} else {
						got = bf16Float(binary.LittleEndian.Uint16(out[2*(i+j*m):]))
						tol = math.Abs(ref)/128 + 1e-5*mag + 1e-6
					}
					if !(math.Abs(got-ref) <= tol) {
						if bad < 5 {
							t.Errorf("C[%d,%d] = %g, want %g (tolerance %g)", i, j, got, ref, tol)
						}
						bad++
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d elements wrong", bad, m*n)
			}
		})
	}
	// A refused call is an error naming the call, not a silent no-op.
	if err := h.Gemm(Gemm{M: m, N: n, K: k, A: dA, B: dB, C: dC, AType: R16BF, BType: R16BF, CType: R32F, LdA: 1}); err == nil {
		t.Error("GEMM with lda < m succeeded")
	}
}
