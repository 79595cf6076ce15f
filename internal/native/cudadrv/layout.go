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
