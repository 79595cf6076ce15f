package main

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWheel builds the wheel with python/build_wheel.py (go build of this
// library inside), checks it (name, WHEEL tag against the GLIBC versions
// the library needs as debug/elf reads them, RECORD hashes), installs it
// with `pip install --no-index --no-deps` into a fresh venv and runs, from
// outside the repository with SYMMEM_LIBRARY and PYTHONPATH unset, `import
// symmem` and a world of one, then `python -m symmem doctor`: both must use
// the library from the wheel. SYMMEM_LIBRARY still wins over it.
func TestWheel(t *testing.T) {
	if raceEnabled {
		t.Skip("the wheel is built and installed in the non-race pass")
	}
	if testing.Short() {
		t.Skip("-short: building and installing the wheel takes 7-40 s")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the wheel test needs it")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// go test caches a result by the files the test opens: read what the
	// wheel is made of (the Go sources are this package's dependencies).
	var version string
	err = filepath.WalkDir(filepath.Join(root, "python"), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".py") {
			var b []byte
			b, err = os.ReadFile(p)
			if p == filepath.Join(root, "python", "symmem", "__init__.py") {
				if m := regexp.MustCompile(`(?m)^__version__\s*=\s*"([^"]+)"`).FindSubmatch(b); m != nil {
					version = string(m[1])
				}
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if version == "" {
		t.Fatal("python/symmem/__init__.py sets no __version__")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	env := wheelEnv()
	run := func(name string, args ...string) []byte {
		t.Helper()
		t0 := time.Now()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = tmp, env // outside the repository: no python/ on the path
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
		}
		line, _, _ := strings.Cut(strings.Join(args, " "), "\n")
		t.Logf("%s %s: %.2fs", filepath.Base(name), line, time.Since(t0).Seconds())
		return stdout.Bytes()
	}

	// Build.
	goCmd, err := exec.LookPath("go") // go test puts its own GOROOT/bin first in PATH
	if err != nil {
		t.Fatalf("no go command: %v", err)
	}
	out := strings.Split(strings.TrimSpace(string(run(py, filepath.Join(root, "python", "build_wheel.py"),
		"--out", filepath.Join(tmp, "dist"), "--go", goCmd))), "\n")
	whl := out[len(out)-1]
	so := checkWheel(t, whl, version)

	// Install into a fresh venv.
	venv := filepath.Join(tmp, "venv")
	if b, err := exec.CommandContext(ctx, py, "-m", "venv", venv).CombinedOutput(); err != nil {
		t.Skipf("python3 -m venv does not work here (%v): %s", err, bytes.TrimSpace(b))
	}
	vpy := filepath.Join(venv, "bin", "python")
	t.Logf("pip: %s", bytes.TrimSpace(run(vpy, "-m", "pip", "install", "--no-index", "--no-deps", whl)))
	site := strings.TrimSpace(string(run(vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])")))
	pkg := filepath.Join(site, "symmem")
	lib := filepath.Join(pkg, "libsymmem.so")
	installed, err := os.ReadFile(lib)
	if err != nil {
		t.Fatalf("the install has no library: %v", err)
	}
	if !bytes.Equal(installed, so) {
		t.Errorf("%s differs from the wheel's symmem/libsymmem.so", lib)
	}

	// import symmem and a world of one: the package and library from the venv.
	var got struct {
		File, Library, Version string
		ABI                    int
		Sum                    []int
	}
	prog := `import json, os, socket, symmem
from symmem import _lib
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
# rank 0 hosts the store on master_port+1: the port just found free (its
# successor, unchecked, was taken by another test in CI once)
w = symmem.init(backend="cpu", timeout=30, rank=0, world_size=1, local_rank=0, local_world_size=1,
                master_addr="127.0.0.1", master_port=port - 1, token="wheel-test", job_id="wheel-%d" % os.getpid())
b = symmem.empty_buffer(4, "int32"); b[:] = __import__("array").array("i", [1, 2, 3, 4])
symmem.all_reduce(b)
print(json.dumps(dict(file=symmem.__file__, library=_lib.path, version=symmem.__version__,
                      abi=_lib.lib.symmem_abi_version(), sum=list(b))))
w.close()`
	if err := json.Unmarshal(run(vpy, "-c", prog), &got); err != nil {
		t.Fatal(err)
	}
	if got.File != filepath.Join(pkg, "__init__.py") || got.Library != lib || got.Version != version || got.ABI != abiVersion ||
		fmt.Sprint(got.Sum) != "[1 2 3 4]" {
		t.Errorf("import symmem from the venv: %+v; want package %s, library %s, version %s, ABI %d, sum [1 2 3 4]",
			got, pkg, lib, version, abiVersion)
	}

	// python -m symmem doctor: no launcher, no symmem binary.
	var doc struct {
		Package struct {
			Version, Library string
			ABI              int `json:"abi_version"`
		}
		WorldFrom    string `json:"world_from"`
		Backend, Why string
		Size         int
		Paths        []json.RawMessage
	}
	text := run(vpy, "-m", "symmem", "doctor")
	if err := json.Unmarshal(text, &doc); err != nil {
		t.Fatalf("python -m symmem doctor: %v\n%s", err, text)
	}
	if doc.Package.Library != lib || doc.Package.Version != version || doc.Package.ABI != abiVersion || doc.Size != 1 ||
		doc.Backend == "" || doc.Why == "" || len(doc.Paths) == 0 {
		t.Errorf("python -m symmem doctor: %+v; want library %s, version %s, ABI %d, a world of one\n%s", doc, lib, version, abiVersion, text)
	}
	t.Logf("doctor: backend %s (%s), library %s", doc.Backend, doc.Why, doc.Package.Library)

	// SYMMEM_LIBRARY still wins over the package's copy (here a copy of it
	// elsewhere: no second build).
	other := filepath.Join(tmp, "other", "libsymmem.so")
	if err := os.MkdirAll(filepath.Dir(other), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, so, 0o755); err != nil {
		t.Fatal(err)
	}
	env = append(env, "SYMMEM_LIBRARY="+other)
	if p := strings.TrimSpace(string(run(vpy, "-c", "from symmem import _lib; print(_lib.path)"))); p != other {
		t.Errorf("with SYMMEM_LIBRARY=%s the package loaded %s", other, p)
	}
}

// wheelEnv is the environment without what would point Python or pip
// elsewhere: SYMMEM_LIBRARY, PYTHONPATH, PYTHONHOME, a virtualenv's.
func wheelEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "SYMMEM_LIBRARY", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONNOUSERSITE":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1", "PYTHONNOUSERSITE=1")
}

// checkWheel checks the wheel at path per the binary distribution format
// and returns its library.
func checkWheel(t *testing.T, path, version string) []byte {
	t.Helper()
	z, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	files := map[string][]byte{}
	var names []string
	for _, f := range z.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		files[f.Name] = b
		names = append(names, f.Name)
	}
	info := "symmem-" + version + ".dist-info/"
	so := files["symmem/libsymmem.so"]
	for _, want := range []string{"symmem/__init__.py", "symmem/__main__.py", "symmem/_lib.py", "symmem/libsymmem.so",
		info + "METADATA", info + "WHEEL", info + "RECORD"} {
		if _, ok := files[want]; !ok {
			t.Errorf("%s has no %s (has %v)", filepath.Base(path), want, names)
		}
	}
	if names[len(names)-1] != info+"RECORD" {
		t.Errorf("RECORD is not the archive's last file: %v", names)
	}
	for _, n := range names {
		if strings.Contains(n, "__pycache__") || strings.HasSuffix(n, ".h") {
			t.Errorf("%s: %s does not belong in the wheel", filepath.Base(path), n)
		}
	}

	// The platform tag: manylinux_X_Y_<arch> for the highest GLIBC_X.Y the
	// library's imported symbols need.
	f, err := elf.NewFile(bytes.NewReader(so))
	if err != nil {
		t.Fatalf("symmem/libsymmem.so: %v", err)
	}
	syms, err := f.ImportedSymbols()
	if err != nil {
		t.Fatal(err)
	}
	hi := [2]int{2, 17}
	for _, s := range syms {
		v, ok := strings.CutPrefix(s.Version, "GLIBC_")
		if !ok {
			continue
		}
		parts := strings.Split(v, ".")
		maj, err1 := strconv.Atoi(parts[0])
		mnr, err2 := strconv.Atoi(parts[1])
		if err1 != nil || err2 != nil {
			continue
		}
		if maj > hi[0] || maj == hi[0] && mnr > hi[1] {
			hi = [2]int{maj, mnr}
		}
	}
	arch := map[elf.Machine]string{elf.EM_X86_64: "x86_64", elf.EM_AARCH64: "aarch64"}[f.Machine]
	tag := fmt.Sprintf("py3-none-manylinux_%d_%d_%s", hi[0], hi[1], arch)
	if want := "symmem-" + version + "-" + tag + ".whl"; filepath.Base(path) != want {
		t.Errorf("wheel %s, want %s (the library needs GLIBC_%d.%d)", filepath.Base(path), want, hi[0], hi[1])
	}
	wheel := string(files[info+"WHEEL"])
	for _, want := range []string{"Wheel-Version: 1.0\n", "Root-Is-Purelib: false\n", "Tag: " + tag + "\n"} {
		if !strings.Contains(wheel, want) {
			t.Errorf("WHEEL lacks %q:\n%s", want, wheel)
		}
	}
	meta := string(files[info+"METADATA"])
	for _, want := range []string{"Metadata-Version: 2.1\n", "Name: symmem\n", "Version: " + version + "\n", "Requires-Python: "} {
		if !strings.Contains(meta, want) {
			t.Errorf("METADATA lacks %q:\n%s", want, meta)
		}
	}

	// RECORD: every file once, with its sha256 and size; RECORD itself unhashed.
	rows, err := csv.NewReader(bytes.NewReader(files[info+"RECORD"])).ReadAll()
	if err != nil {
		t.Fatalf("RECORD: %v", err)
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if len(r) != 3 {
			t.Errorf("RECORD row %q: want 3 fields", r)
			continue
		}
		seen[r[0]] = true
		if r[0] == info+"RECORD" {
			if r[1] != "" || r[2] != "" {
				t.Errorf("RECORD's own row %q: want no hash or size", r)
			}
			continue
		}
		b, ok := files[r[0]]
		sum := sha256.Sum256(b)
		if want := "sha256=" + base64.RawURLEncoding.EncodeToString(sum[:]); !ok || r[1] != want || r[2] != strconv.Itoa(len(b)) {
			t.Errorf("RECORD row %q: want %s,%d (in the archive: %v)", r, want, len(b), ok)
		}
	}
	for _, n := range names {
		if !seen[n] {
			t.Errorf("RECORD lacks %s", n)
		}
	}
	t.Logf("%s: %d files, library %d bytes, needs GLIBC_%d.%d", filepath.Base(path), len(names), len(so), hi[0], hi[1])
	return so
}

// TestWheelEmptyModuleCache: build_wheel with a module cache that lacks
// symmem's dependencies (it builds with GOPROXY=off) says to run `go mod
// download`; it failed in a second saying only "go build failed".
func TestWheelEmptyModuleCache(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the wheel test needs it")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command: ", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	cmd := exec.Command(py, filepath.Join(root, "python", "build_wheel.py"), "--out", filepath.Join(tmp, "dist"), "--go", goCmd)
	cmd.Dir = tmp
	cmd.Env = append(wheelEnv(), "GOMODCACHE="+filepath.Join(tmp, "modcache"), "GOFLAGS=-modcacherw")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Run `go mod download` in "+root) {
		t.Errorf("build_wheel with an empty module cache: %v, want a failure saying to run go mod download\n%s", err, out)
	}
}
