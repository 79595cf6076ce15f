package libnccl

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCandidatesOrder(t *testing.T) {
	// A fake venv with a fake library, found through $VIRTUAL_ENV.
	venv := t.TempDir()
	lib := filepath.Join(venv, "lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2")
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lib, []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Site patterns answered by a fake glob (the machine's own files must
	// not matter); the venv pattern goes to the real filesystem.
	site := map[string][]string{
		SitePatterns[0]: {"/usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2",
			"/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2"},
		SitePatterns[4]: {"/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2", lib},
	}
	glob := func(p string) ([]string, error) {
		if strings.HasPrefix(p, venv) {
			return filepath.Glob(p)
		}
		return site[p], nil
	}
	env := func(vals map[string]string) func(string) string {
		return func(k string) string { return vals[k] }
	}
	cases := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"explicit path only", map[string]string{EnvLib: "/x/libnccl.so.2", "VIRTUAL_ENV": venv}, []string{"/x/libnccl.so.2"}},
		{"loader, venv, site (dedup)", map[string]string{"VIRTUAL_ENV": venv}, []string{
			"libnccl.so.2", lib,
			"/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2",
			"/usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2",
			"/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"}},
		{"no venv", nil, []string{"libnccl.so.2",
			"/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2",
			"/usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2",
			lib, "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"}}, // newest first within a pattern
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Candidates(env(c.env), glob)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}
