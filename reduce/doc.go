// Package reduce owns the elementwise reductions that CPU collectives run:
// dst = dst op src for every coll.DType and coll.ReduceOp, a multi-source
// variant that reduces k inputs in one pass over memory, the final step of
// an average, and exact float16/bfloat16 <-> float32 conversions.
//
// Semantics
//   - Sum and Avg add (Avg is a Sum until Finish divides by the number of
//     ranks); Min and Max select. Integers wrap on overflow (two's
//     complement), and Finish divides integers with truncation toward zero.
//   - Float Min/Max propagate NaN: if any input is NaN the result is NaN
//     (as torch.minimum/maximum do).
//   - float32 and float64 accumulate in their own precision, in source order.
//   - bfloat16 and float16 are accumulated in float32 across all sources of
//     one call and rounded to nearest-even once at the end, so IntoN/ReduceN
//     over k sources round once, where k calls of Into round k times.
//
// Memory
// Buffers are raw bytes holding elements in the host's byte order
// (little-endian on every supported platform), as they lie in shared memory
// or device memory. They may come from mmap'd segments. Aligned buffers are
// read through typed views (internal/native/hostmem.View) so the loops run at
// memory speed; a misaligned buffer is handled through small aligned copies,
// correct but slower. Work is done in cache-sized blocks: for k sources every
// byte of dst and of each source crosses the memory bus once.
//
// Aliasing: dst may be the very same memory (same first byte and length) as
// any of the sources, e.g. an in-place reduce-scatter where dst is this
// rank's own input slice at any position in the source list; the result is
// as if every source had been read first. A partial overlap (shifted ranges)
// gives undefined results.
//
// Errors: lengths that differ, a length that is not a multiple of the
// element size, an unknown dtype or op: the error says which, and dst is not
// touched.
package reduce
