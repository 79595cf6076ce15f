package cuda

import "github.com/symmem/symmem/coll"

// auto's steps (autotable.go: auto reads them), of which the paths' rows
// in pathTable are made.

// The fallback order: where the table's path does not take the call, auto
// tries the next path in its order:
//
//	kernel      -> nccl-window -> nccl
//	two-shot    -> nccl-window -> nccl
//	lc          -> nccl-window -> nccl
//	ll          -> kernel -> nccl-window -> nccl
//	ce          -> nccl-window -> nccl
//	nccl-window -> nccl
//	nccl
//
// The orders and the turns are the paths' rows in pathTable (fallback,
// turn). In a path's turn its steps are tried in order, and the first
// whose conditions all hold takes the call, with its reason. A turn may
// hand the call to another path than its own: nccl-window's gives an
// all-gather off windows to the kernel or copy engines (the table's next
// best there), NCCL's gives a call to symmem's paths where NCCL is
// unavailable or unsafe. two-shot, lc and ll start auto only where a
// measured table says they are fastest (the transcribed rows never name
// them). In ce's order nccl-window's kernel step never
// takes a call copy engines refused: the kernel needs the peer mappings
// and a registered output, with which copy engines serve an all-gather.
// autoStep is one step of a path's turn.
type autoStep struct {
	algo coll.Algo // the path that takes the call; AlgoAuto: none, it is refused (autoFacts.noPath)
	when []autoCond
	why  string
	// row is algo's in pathTable (its serves answers pathServes), set
	// where the orders are joined (pathTable's init).
	row int
	// kindWhy is the reason per op, where it names the op (constant: no
	// formatting per call).
	kindWhy map[coll.Kind]string
}

// elementwiseToNCCL leaves a reduction symmem's kernels would run element
// by element to NCCL (reduceElementwise): the first step of every
// reduction kernel's turn.
var elementwiseToNCCL = autoStep{algo: coll.AlgoNCCL, when: []autoCond{ncclUsable, elementwise},
	why: "auto: plain NCCL, symmem's reduction kernels would go element by element here (a buffer or the per-rank size off 16 bytes)"}

// autoCond is a condition of auto's steps (autoFacts.holds says when it
// holds).
type autoCond uint8

const (
	ncclUsable    autoCond = iota // the group has NCCL, it is safe for the call, and (all-to-all) the loaded NCCL has its calls (ncclA2AWhy)
	ncclUnusable                  // not ncclUsable
	noNCCL                        // the group has no NCCL communicator
	goodWindows                   // the buffers are in windows NCCL's symmetric kernels do well
	noWindows                     // the buffers are not in windows
	poorWindows                   // the buffers are in windows, but NCCL's symmetric kernels are slow or wrong there
	notSymmetric                  // the buffers are not pool blocks registered with the group
	elementwise                   // symmem's reduction kernel would run in element mode
	oneShot                       // a reduction the one-shot kernel does as fast as two-shot (oneShotMax)
	allGather                     // the call is an all-gather
	notAllGather                  // the call is not an all-gather (symmem's reduction paths refuse a broadcast themselves)
	allReduce                     // the call is an all-reduce
	allToAll                      // the call is an all-to-all
	deviceSplits                  // the call is an all-to-all with split counts on the device
	pathServes                    // the step's path would run it (pathInfo.serves)
	lcReady                       // lc's staging exists, or can be made now (the stream is not being captured)
	llSmall                       // ll's row is at most llSmallRow
	llBytesLarge                  // ll's row is above llSmallRow and a buffer is off 16 bytes (its bytes mode)
	symmetricBufs                 // not notSymmetric
)

// llSmallRow bounds the rows where ll takes a call NCCL's windows cannot:
// up to 256 KiB per rank ll beats the kernel and plain NCCL (at 1 MiB plain
// NCCL's all-reduce is ahead).
const llSmallRow = 256 << 10
