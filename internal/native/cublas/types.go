package cublas

import (
	"fmt"

	"github.com/symmem/symmem/internal/errs"
)

// Status is cublasStatus_t.
type Status int

// cublasStatus_t values (cublas_api.h).
const (
	StatusSuccess         Status = 0
	StatusNotInitialized  Status = 1
	StatusAllocFailed     Status = 3
	StatusInvalidValue    Status = 7
	StatusArchMismatch    Status = 8
	StatusMappingError    Status = 11
	StatusExecutionFailed Status = 13
	StatusInternalError   Status = 14
	StatusNotSupported    Status = 15
	StatusLicenseError    Status = 16
)

var statusNames = map[Status]string{
	StatusSuccess: "CUBLAS_STATUS_SUCCESS", StatusNotInitialized: "CUBLAS_STATUS_NOT_INITIALIZED",
	StatusAllocFailed: "CUBLAS_STATUS_ALLOC_FAILED", StatusInvalidValue: "CUBLAS_STATUS_INVALID_VALUE",
	StatusArchMismatch: "CUBLAS_STATUS_ARCH_MISMATCH", StatusMappingError: "CUBLAS_STATUS_MAPPING_ERROR",
	StatusExecutionFailed: "CUBLAS_STATUS_EXECUTION_FAILED", StatusInternalError: "CUBLAS_STATUS_INTERNAL_ERROR",
	StatusNotSupported: "CUBLAS_STATUS_NOT_SUPPORTED", StatusLicenseError: "CUBLAS_STATUS_LICENSE_ERROR",
}

func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("cublasStatus(%d)", int(s))
}

// DataType is cudaDataType (library_types.h).
type DataType int32

// cudaDataType values used here (library_types.h: CUDA_R_32F = 0,
// CUDA_R_16F = 2, CUDA_R_16BF = 14).
const (
	R32F  DataType = 0
	R16F  DataType = 2
	R16BF DataType = 14
)

// Size is the element size in bytes.
func (d DataType) Size() int {
	if d == R32F {
		return 4
	}
	return 2
}

func (d DataType) String() string {
	switch d {
	case R32F:
		return "f32"
	case R16F:
		return "f16"
	case R16BF:
		return "bf16"
	}
	return fmt.Sprintf("cudaDataType(%d)", int(d))
}

// Operation is cublasOperation_t (cublas_api.h: CUBLAS_OP_N = 0,
// CUBLAS_OP_T = 1).
type Operation int32

const (
	OpN Operation = 0
	OpT Operation = 1
)

// ComputeType is cublasComputeType_t (cublas_api.h). Only 32-bit float
// compute types are offered: Gemm passes alpha and beta as float.
type ComputeType int32

const (
	// Compute32F: float accumulation, tensor cores allowed for 16-bit inputs
	// (CUBLAS_COMPUTE_32F = 68).
	Compute32F ComputeType = 68
	// Compute32FPedantic: float, standard arithmetic (CUBLAS_COMPUTE_32F_PEDANTIC = 69).
	Compute32FPedantic ComputeType = 69
)

// algoDefault is CUBLAS_GEMM_DEFAULT (cublas_api.h: -1): cuBLAS's heuristics.
const algoDefault = -1

// Error is a failed cuBLAS call, or the CUDA driver call made before it.
type Error struct {
	Call string // e.g. "cublasGemmEx", "cuCtxSetCurrent (before cublasCreate_v2)"
	Code int    // cublasStatus_t, or CUresult when CUDA is true
	CUDA bool
	Msg  string // cublasGetStatusString, when the library has it
}

func (e *Error) Error() string {
	if e.CUDA {
		return fmt.Sprintf("cublas: %s failed: CUDA error %d", e.Call, e.Code)
	}
	s := fmt.Sprintf("cublas: %s failed: %s (%d)", e.Call, Status(e.Code), e.Code)
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// Is makes errors.Is(err, errs.NotSupported) hold for CUBLAS_STATUS_NOT_SUPPORTED.
func (e *Error) Is(target error) bool {
	return target == errs.NotSupported && !e.CUDA && Status(e.Code) == StatusNotSupported
}

// LoadError says why no cuBLAS library could be used; it matches
// errs.NotSupported.
type LoadError struct {
	Tried []string // "candidate: why it failed", in order
	Where string   // the places searched besides the loader path
}

func (e *LoadError) Error() string {
	if len(e.Tried) == 0 {
		return fmt.Sprintf("cublas: libcublas not found: no candidates to try; set %s=/path/to/libcublas.so.13 (or .so.12)", EnvLib)
	}
	s := "cublas: libcublas not found or unusable (tried "
	for i, t := range e.Tried {
		if i > 0 {
			s += "; "
		}
		s += t
	}
	s += ")"
	if e.Where != "" {
		s += "; searched " + e.Where
	}
	return s + fmt.Sprintf("; set %s=/path/to/libcublas.so.13 (or .so.12), or install the CUDA toolkit or NVIDIA's cuBLAS pip wheel (PyTorch's CUDA wheels bring one)", EnvLib)
}

func (e *LoadError) Is(target error) bool { return target == errs.NotSupported }
