package libnccl

import (
	"path/filepath"

	"github.com/symmem/symmem/internal/native/libsearch"
)

// EnvLib names the environment variable that points at an explicit
// libnccl.so.2. When it is set, only that path is tried.
const EnvLib = "SYMMEM_NCCL_LIB"

// DefaultName is what the dynamic loader's own search resolves.
const DefaultName = "libnccl.so.2"

// search is where NCCL is looked for: the NVIDIA NCCL wheel
// (nvidia-nccl-cu12 / -cu13) installs into nvidia/nccl/lib.
var search = libsearch.Search{Env: EnvLib, Names: []string{DefaultName}, SiteDirs: []string{"nvidia/nccl/lib"}}

// SitePatterns are the system site-packages copies tried after the loader
// path and $VIRTUAL_ENV's, in this order.
var SitePatterns = func() []string {
	var p []string
	for _, r := range libsearch.SiteRoots {
		p = append(p, filepath.Join(r, search.SiteDirs[0], DefaultName))
	}
	return p
}()

// Candidates lists the libraries to try, in order: $SYMMEM_NCCL_LIB alone
// when set; otherwise "libnccl.so.2" (loader path), then existing
// site-packages copies ($VIRTUAL_ENV first, then SitePatterns; within one
// pattern newest first, numbers compared as numbers). getenv and glob are
// injected so the order can be tested without touching the machine;
// duplicates are removed.
func Candidates(getenv func(string) string, glob func(string) ([]string, error)) []string {
	return search.Candidates(getenv, glob)
}
