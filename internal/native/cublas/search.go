package cublas

import (
	"path/filepath"
	"sort"
	"strings"
)

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

// SiteRoots are the site-packages folders searched after $VIRTUAL_ENV's.
var SiteRoots = []string{
	"/usr/local/lib/python3*/dist-packages",
	"/usr/local/lib/python3*/site-packages",
	"/usr/lib/python3*/dist-packages",
	"/usr/lib/python3*/site-packages",
	"/opt/*/.venv/lib/python3*/site-packages",
}

// ToolkitDirs are CUDA toolkit library folders, searched last.
var ToolkitDirs = []string{"/usr/local/cuda/lib64", "/usr/local/cuda-*/lib64"}

// Candidates lists the libraries to try, in order: $SYMMEM_CUBLAS_LIB alone
// when set; otherwise DefaultNames (loader path), then existing copies in
// site-packages ($VIRTUAL_ENV's first, then SiteRoots; SiteDirs in order
// within each; within one pattern, reverse lexical order so the newest
// Python comes first), then the toolkit folders. getenv and glob are
// injected so the order can be tested without touching the machine;
// duplicates are removed.
func Candidates(getenv func(string) string, glob func(string) ([]string, error)) []string {
	if p := getenv(EnvLib); p != "" {
		return []string{p}
	}
	out := append([]string(nil), DefaultNames...)
	seen := map[string]bool{}
	for _, n := range out {
		seen[n] = true
	}
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
	inRoot := func(root string) {
		for _, d := range SiteDirs {
			for _, n := range DefaultNames {
				add(filepath.Join(root, d, n))
			}
		}
	}
	if v := getenv("VIRTUAL_ENV"); v != "" {
		inRoot(filepath.Join(v, "lib/python3*/site-packages"))
	}
	for _, r := range SiteRoots {
		inRoot(r)
	}
	for _, d := range ToolkitDirs {
		for _, n := range DefaultNames {
			add(filepath.Join(d, n))
		}
	}
	return out
}

// SearchedWhere describes, for error messages, where Candidates looks
// besides the loader's path.
func SearchedWhere() string {
	return "the loader path (LD_LIBRARY_PATH, ldconfig), $VIRTUAL_ENV and " +
		filepath.Join("<site-packages>", "{"+SiteDirs[0]+","+SiteDirs[1]+"}") +
		" under " + strings.Join(SiteRoots, ", ") + ", and " + strings.Join(ToolkitDirs, ", ")
}
