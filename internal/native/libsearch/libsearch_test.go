package libsearch

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestCandidates: explicit path alone; else names, $VIRTUAL_ENV's wheel
// folders, the system's, the extra folders; only existing files, no
// duplicates, the newest Python first within a pattern.
func TestCandidates(t *testing.T) {
	s := Search{Env: "LIB", Names: []string{"liba.so.2", "liba.so.1"}, SiteDirs: []string{"w/a", "w/b"}, ExtraDirs: []string{"/tk/lib64"}}
	files := map[string][]string{
		"/venv/lib/python3*/site-packages/w/b/liba.so.1":      {"/venv/lib/python3.12/site-packages/w/b/liba.so.1"},
		"/usr/local/lib/python3*/dist-packages/w/a/liba.so.2": {"/usr/local/lib/python3.10/dist-packages/w/a/liba.so.2", "/usr/local/lib/python3.12/dist-packages/w/a/liba.so.2"},
		"/tk/lib64/liba.so.2":                                 {"/tk/lib64/liba.so.2"},
	}
	glob := func(p string) ([]string, error) { return files[p], nil }
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"explicit", map[string]string{"LIB": "/x/liba.so", "VIRTUAL_ENV": "/venv"}, []string{"/x/liba.so"}},
		{"search", map[string]string{"VIRTUAL_ENV": "/venv"}, []string{"liba.so.2", "liba.so.1",
			"/venv/lib/python3.12/site-packages/w/b/liba.so.1",
			"/usr/local/lib/python3.12/dist-packages/w/a/liba.so.2", "/usr/local/lib/python3.10/dist-packages/w/a/liba.so.2",
			"/tk/lib64/liba.so.2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := s.Candidates(func(k string) string { return tc.env[k] }, glob)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	if w := s.Where(); !strings.Contains(w, "{w/a,w/b}") || !strings.Contains(w, "/tk/lib64") || !strings.Contains(w, SiteRoots[0]) {
		t.Errorf("Where() = %q does not name the folders", w)
	}
}

// TestNewestPythonFirst: python3.12's copy comes before python3.9's
// (reverse lexical order put 3.9 first; found by review).
func TestNewestPythonFirst(t *testing.T) {
	s := Search{Env: "LIB", Names: []string{"liba.so.2"}, SiteDirs: []string{"w/a"}}
	files := map[string][]string{
		"/usr/local/lib/python3*/dist-packages/w/a/liba.so.2": {
			"/usr/local/lib/python3.9/dist-packages/w/a/liba.so.2",
			"/usr/local/lib/python3.12/dist-packages/w/a/liba.so.2",
		},
	}
	glob := func(p string) ([]string, error) { return files[p], nil }
	got := s.Candidates(func(string) string { return "" }, glob)
	want := []string{"liba.so.2",
		"/usr/local/lib/python3.12/dist-packages/w/a/liba.so.2",
		"/usr/local/lib/python3.9/dist-packages/w/a/liba.so.2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestVirtualEnvWithBrackets: a virtual environment whose path holds a
// pattern character ("[1]") is searched as the literal folder (it was a
// character class: the venv's copy was never found; found by review).
func TestVirtualEnvWithBrackets(t *testing.T) {
	venv := filepath.Join(t.TempDir(), "proj[1]")
	lib := filepath.Join(venv, "lib/python3.12/site-packages/w/a/liba.so.2")
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lib, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := Search{Env: "LIB", Names: []string{"liba.so.2"}, SiteDirs: []string{"w/a"}}
	got := s.Candidates(func(k string) string {
		if k == "VIRTUAL_ENV" {
			return venv
		}
		return ""
	}, filepath.Glob)
	for _, p := range got {
		if p == lib {
			return
		}
	}
	t.Errorf("venv copy %s not among candidates %q", lib, got)
}
