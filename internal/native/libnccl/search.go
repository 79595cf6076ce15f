package libnccl

import (
	"path/filepath"
	"sort"
)

// EnvLib names the environment variable that points at an explicit
// libnccl.so.2. When it is set, only that path is tried.
const EnvLib = "SYMMEM_NCCL_LIB"

// DefaultName is what the dynamic loader's own search resolves.
const DefaultName = "libnccl.so.2"

// SitePatterns are the Python site-packages locations of the NVIDIA NCCL
// wheel (nvidia-nccl-cu12 / -cu13), tried after the default loader path, in
// this order. $VIRTUAL_ENV's is tried first among them.
var SitePatterns = []string{
	"/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
	"/usr/local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
	"/usr/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
	"/usr/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
	"/opt/*/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
}

// Candidates lists the libraries to try, in order: $SYMMEM_NCCL_LIB alone
// when set; otherwise "libnccl.so.2" (loader path), then existing
// site-packages copies ($VIRTUAL_ENV first, then SitePatterns; within one
// pattern, reverse lexical order). getenv and glob are injected so the order
// can be tested without touching the machine; duplicates are removed.
func Candidates(getenv func(string) string, glob func(string) ([]string, error)) []string {
	if p := getenv(EnvLib); p != "" {
		return []string{p}
	}
	out := []string{DefaultName}
	seen := map[string]bool{DefaultName: true}
	add := func(pattern string) {
		m, err := glob(pattern)
		if err != nil {
			return
		}
		sort.Sort(sort.Reverse(sort.StringSlice(m)))
		for _, p := range m {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	if v := getenv("VIRTUAL_ENV"); v != "" {
		add(filepath.Join(v, "lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2"))
	}
	for _, p := range SitePatterns {
		add(p)
	}
	return out
}
