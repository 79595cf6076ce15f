// Package libsearch finds the shared libraries symmem loads at run time
// (NCCL, cuBLAS) the way their users install them: an explicit path in an
// environment variable, the dynamic loader's own search, NVIDIA's pip wheels
// in a virtual environment or a system site-packages, a CUDA toolkit. Pure
// logic: the environment and the file system are injected, so the order is
// tested without touching the machine.
package libsearch

import (
	"path/filepath"
	"sort"
	"strings"
)

// SiteRoots are the site-packages folders searched after $VIRTUAL_ENV's.
var SiteRoots = []string{
	"/usr/local/lib/python3*/dist-packages",
	"/usr/local/lib/python3*/site-packages",
	"/usr/lib/python3*/dist-packages",
	"/usr/lib/python3*/site-packages",
	"/opt/*/.venv/lib/python3*/site-packages",
}

// Search says where one library may be.
type Search struct {
	Env       string   // a variable naming the library's path: when set, only it is tried
	Names     []string // what the loader resolves (LD_LIBRARY_PATH, ldconfig), preferred first
	SiteDirs  []string // wheel folders inside a site-packages folder (e.g. nvidia/nccl/lib)
	ExtraDirs []string // folders searched last (e.g. a CUDA toolkit's lib64)
}

// Candidates lists the paths to try, in order: $Env alone when set;
// otherwise Names, then existing copies under site-packages ($VIRTUAL_ENV's
// first, then SiteRoots; SiteDirs in order within each root, Names within
// each folder; within one pattern newest first, numbers compared as
// numbers: python3.12 before python3.9), then ExtraDirs. Duplicates are
// removed.
func (s Search) Candidates(getenv func(string) string, glob func(string) ([]string, error)) []string {
	if p := getenv(s.Env); p != "" {
		return []string{p}
	}
	out := append([]string(nil), s.Names...)
	seen := map[string]bool{}
	for _, n := range out {
		seen[n] = true
	}
	add := func(pattern string) {
		m, err := glob(pattern)
		if err != nil {
			return
		}
		sort.Slice(m, func(i, j int) bool { return naturalLess(m[j], m[i]) })
		for _, p := range m {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	inDir := func(dir string) {
		for _, n := range s.Names {
			add(filepath.Join(dir, n))
		}
	}
	if v := getenv("VIRTUAL_ENV"); v != "" {
		for _, d := range s.SiteDirs {
			// The venv's path is the user's, not a pattern: "[", "*" or "?"
			// in it must match themselves.
			inDir(filepath.Join(globQuote(v), "lib/python3*/site-packages", d))
		}
	}
	for _, r := range SiteRoots {
		for _, d := range s.SiteDirs {
			inDir(filepath.Join(r, d))
		}
	}
	for _, d := range s.ExtraDirs {
		inDir(d)
	}
	return out
}

// Where describes, for error messages, where Candidates looks besides the
// loader's path.
func (s Search) Where() string {
	w := "the loader path (LD_LIBRARY_PATH, ldconfig), $VIRTUAL_ENV and " +
		filepath.Join("<site-packages>", "{"+strings.Join(s.SiteDirs, ",")+"}") +
		" under " + strings.Join(SiteRoots, ", ")
	if len(s.ExtraDirs) > 0 {
		w += ", and " + strings.Join(s.ExtraDirs, ", ")
	}
	return w
}

// globQuote escapes the pattern characters of filepath.Match in a literal
// path.
func globQuote(p string) string {
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// naturalLess orders strings with runs of digits compared as numbers
// ("python3.9" < "python3.12"), the rest byte by byte.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

// digits is the length of s's leading run of ASCII digits.
func digits(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
