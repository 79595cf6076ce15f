package cublas

import "github.com/symmem/symmem/internal/native/libsearch"

// EnvLib names the environment variable that points at an explicit
// libcublas.so. When it is set, only that path is tried.
const EnvLib = "SYMMEM_CUBLAS_LIB"

// DefaultNames are what the dynamic loader's own search resolves (the
// system's CUDA, LD_LIBRARY_PATH), newest major version first.
var DefaultNames = []string{"libcublas.so.13", "libcublas.so.12"}

// SiteDirs are the library folders of NVIDIA's pip wheels inside a
// site-packages folder: CUDA 13 wheels install into nvidia/cu13/lib, CUDA 12
// ones (nvidia-cublas-cu12) into nvidia/cublas/lib.
var SiteDirs = []string{"nvidia/cu13/lib", "nvidia/cublas/lib"}

// ToolkitDirs are CUDA toolkit library folders, searched last.
var ToolkitDirs = []string{"/usr/local/cuda/lib64", "/usr/local/cuda-*/lib64"}

var search = libsearch.Search{Env: EnvLib, Names: DefaultNames, SiteDirs: SiteDirs, ExtraDirs: ToolkitDirs}

// Candidates lists the libraries to try, in order: $SYMMEM_CUBLAS_LIB alone
// when set; otherwise DefaultNames (loader path), then existing copies in
// site-packages ($VIRTUAL_ENV's first, then libsearch.SiteRoots; SiteDirs in
// order within each; within one pattern newest first, numbers compared as
// numbers: python3.12 before python3.9), then the toolkit folders. getenv and glob are
// injected so the order can be tested without touching the machine;
// duplicates are removed.
func Candidates(getenv func(string) string, glob func(string) ([]string, error)) []string {
	return search.Candidates(getenv, glob)
}

// SearchedWhere describes, for error messages, where Candidates looks
// besides the loader's path.
func SearchedWhere() string { return search.Where() }
