package cuda

import (
	"errors"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/native/libnccl"
)

// NCCL runs its symmetric kernels on any call whose buffers lie in windows
// registered with the communicator. On NCCL 2.28.9 (and the in-place
// all-gather on 2.28.3 before it) those kernels return wrong elements for
// some shapes and are several times slower than NCCL's regular kernels for
// others. repro/nccl-symmetric checks every op, dtype, placement and count
// 1..4100 (plus larger ones) against libnccl alone, and TestGPUStress found
// the buffer-offset cases:
//   - reduce-scatter of bfloat16/float16, in and out of place, is wrong at
//     every odd count from 5 to 4099 per rank (float32 always right);
//   - in-place all-gather is wrong at every per-rank size that is not a
//     multiple of 4 bytes from 5 B (int8 from 3 B) up to at least 16 KiB;
//   - a buffer 2 bytes past a 4-byte boundary (bf16 at an odd element
//     offset inside a pool block) gave wrong all-reduce, reduce-scatter and
//     all-gather results even at aligned sizes;
//   - all-reduce, broadcast and out-of-place all-gather are otherwise right;
//   - a per-rank size that is not a multiple of 16 bytes takes a slow path,
//     up to 9x plain NCCL's time.
// So: shapes known to be wrong never reach the symmetric kernels (a forced
// nccl-window call is refused with ErrNCCLWindowWrong, auto takes another
// path), and auto gives windows only 16-byte aligned buffers and per-rank
// sizes. No NCCL release is known to fix it: the rule holds from the first
// release with windows until a version is verified with the repro.

// ErrNCCLWindowWrong is wrapped when a call would run NCCL's symmetric
// kernels on a shape they are known to get wrong (see above).
var ErrNCCLWindowWrong = errors.New("NCCL's symmetric kernels return wrong data for this shape (a buffer not 4-byte aligned, or a reduce_scatter or in-place all_gather whose per-rank size is not a multiple of 4 bytes; see repro/nccl-symmetric): use nccl, kernel, ce or lc, or align and pad the buffers")

// windowFixedIn is the first NCCL release known to run every shape right on
// windows (none yet: the rule applies to every version with windows).
var windowFixedIn = 1 << 62

// windowVerdict is what NCCL's symmetric kernels make of a call's shape.
type windowVerdict uint8

const (
	windowGood  windowVerdict = iota
	windowSlow                // right, but auto prefers NCCL's regular kernels
	windowWrong               // known to return wrong elements
)

// judgeWindow says how NCCL version v's symmetric kernels handle req (its
// sizes, placement and buffer addresses). Pure.
func judgeWindow(req backend.Request, v int) windowVerdict {
	slice := req.Count * int64(req.DType.Size()) // all-gather input, reduce-scatter output, all-reduce whole
	buggy := v >= libnccl.MinWindowVersion && v < windowFixedIn
	// Window heads are segment bases (granularity-aligned), so a buffer's
	// address mod 16 is its offset from the head mod 16.
	addr := req.Out.Ptr | req.In.Ptr
	if req.Kind == coll.Broadcast {
		addr = req.Out.Ptr
	}
	switch {
	case buggy && (addr%4 != 0 || slice%4 != 0 && (req.Kind == coll.ReduceScatter || (req.Kind == coll.AllGather && req.InPlace))):
		return windowWrong
	case slice%16 != 0 || addr%16 != 0:
		return windowSlow
	}
	return windowGood
}
