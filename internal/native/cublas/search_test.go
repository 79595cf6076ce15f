package cublas

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCandidates(t *testing.T) {
	files := map[string][]string{
		"/venv/lib/python3*/site-packages/nvidia/cu13/lib/libcublas.so.13":        {"/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13"},
		"/usr/local/lib/python3*/dist-packages/nvidia/cublas/lib/libcublas.so.12": {"/usr/local/lib/python3.10/dist-packages/nvidia/cublas/lib/libcublas.so.12", "/usr/local/lib/python3.11/dist-packages/nvidia/cublas/lib/libcublas.so.12"},
		"/usr/local/cuda/lib64/libcublas.so.13":                                   {"/usr/local/cuda/lib64/libcublas.so.13"},
		"/usr/local/cuda-*/lib64/libcublas.so.13":                                 {"/usr/local/cuda-13.0/lib64/libcublas.so.13"},
	}
	glob := func(p string) ([]string, error) { return slices.Clone(files[p]), nil }
	cases := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"explicit path wins alone", map[string]string{EnvLib: "/x/libcublas.so.13", "VIRTUAL_ENV": "/venv"}, []string{"/x/libcublas.so.13"}},
		{"no venv", nil, []string{"libcublas.so.13", "libcublas.so.12",
			"/usr/local/lib/python3.11/dist-packages/nvidia/cublas/lib/libcublas.so.12",
			"/usr/local/lib/python3.10/dist-packages/nvidia/cublas/lib/libcublas.so.12",
			"/usr/local/cuda/lib64/libcublas.so.13", "/usr/local/cuda-13.0/lib64/libcublas.so.13"}},
		{"venv first", map[string]string{"VIRTUAL_ENV": "/venv"}, []string{"libcublas.so.13", "libcublas.so.12",
			"/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13",
			"/usr/local/lib/python3.11/dist-packages/nvidia/cublas/lib/libcublas.so.12",
			"/usr/local/lib/python3.10/dist-packages/nvidia/cublas/lib/libcublas.so.12",
			"/usr/local/cuda/lib64/libcublas.so.13", "/usr/local/cuda-13.0/lib64/libcublas.so.13"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Candidates(func(k string) string { return c.env[k] }, glob)
			if !slices.Equal(got, c.want) {
				t.Errorf("Candidates =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
		})
	}
}

// TestCandidatesDedup: a venv that is also a SiteRoot is listed once.
func TestCandidatesDedup(t *testing.T) {
	p := "/opt/app/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13"
	glob := func(pat string) ([]string, error) {
		if ok, _ := filepath.Match(pat, p); ok {
			return []string{p}, nil
		}
		return nil, nil
	}
	got := Candidates(func(k string) string {
		if k == "VIRTUAL_ENV" {
			return "/opt/app/.venv"
		}
		return ""
	}, glob)
	if n := slices.Index(got, p); n < 0 || slices.Index(got[n+1:], p) >= 0 {
		t.Errorf("want %s exactly once, got %q", p, got)
	}
}
