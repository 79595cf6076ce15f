package cudadrv

/*
#include "shim.h"
size_t symc_sizeof_prop(void);
size_t symc_sizeof_access(void);
size_t symc_sizeof_batch(void);
size_t symc_offsetof_batch_value(void);
size_t symc_offsetof_batch_flags(void);
size_t symc_offsetof_batch_alias(void);
size_t symc_offsetof_prop_win32(void);
size_t symc_sizeof_op(void);
*/
import "C"

// cLayout reports the C compiler's view of the hand-declared driver structs,
// for layout_test.go (tests cannot use cgo directly).
func cLayout() map[string]int {
	return map[string]int{
		"CUmemAllocationProp":                 int(C.symc_sizeof_prop()),
		"CUmemAllocationProp.win32HandleMeta": int(C.symc_offsetof_prop_win32()),
		"CUmemAccessDesc":                     int(C.symc_sizeof_access()),
		"CUstreamBatchMemOpParams":            int(C.symc_sizeof_batch()),
		"CUstreamBatchMemOpParams.value":      int(C.symc_offsetof_batch_value()),
		"CUstreamBatchMemOpParams.flags":      int(C.symc_offsetof_batch_flags()),
		"CUstreamBatchMemOpParams.alias":      int(C.symc_offsetof_batch_alias()),
		"symc_op":                             int(C.symc_sizeof_op()),
	}
}

// cOpKinds are the C op kinds by their Go names, for layout_test.go.
func cOpKinds() map[string]int {
	return map[string]int{"OpCtx": C.SYMC_OP_CTX, "OpWrite32": C.SYMC_OP_WRITE32, "OpWait32": C.SYMC_OP_WAIT32,
		"OpCopy": C.SYMC_OP_COPY, "OpRecord": C.SYMC_OP_RECORD, "OpWaitEvent": C.SYMC_OP_WAITEVENT, "OpBatch": C.SYMC_OP_BATCH,
		"OpMemset32": C.SYMC_OP_MEMSET32, "OpGraph": C.SYMC_OP_GRAPH, "OpLaunch": C.SYMC_OP_LAUNCH, "OpFence": C.SYMC_OP_FENCE}
}
