package layers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/symmem/symmem"

// Module-relative package patterns: "." is the root (package symmem), "x/..."
// is x and every package below it, anything else one package.
var (
	foundation = []string{"internal/errs", "internal/wait", "internal/native/..."}
	public     = []string{"coll/...", "reduce/...", "pool/...", "rendezvous/...", "launch/...", "doctor"}
)

func join(lists ...[]string) []string { return slices.Concat(lists...) }

// guardedStd are the standard-library packages that, like symmem's own, a
// package imports only where its rule allows them (as "std:path" in allow or
// except): unsafe stays in the native layer, the one place that owns
// foreign memory and pointers.
var guardedStd = []string{"unsafe"}

// rule is one row of the layering: the packages it is about, the symmem
// packages they may import directly (nil: none), declared exceptions
// ("importer -> imported": why it is allowed), and what they must not
// depend on even indirectly (module-relative patterns, or standard-library
// paths prefixed "std:").
type rule struct {
	name   string
	pkgs   []string
	allow  []string
	except map[string]string
	never  []string
}

var rules = []rule{
	{name: "the sentinel errors import nothing of symmem", pkgs: []string{"internal/errs"}},
	{name: "the wait bound sits on the foundation only", pkgs: []string{"internal/wait"},
		allow: []string{"internal/errs", "internal/native/..."}},
	{name: "the native layer wraps C libraries and imports only the foundation", pkgs: []string{"internal/native/..."},
		allow: []string{"internal/native/...", "internal/errs", "std:unsafe"},
		except: map[string]string{
			"internal/native/libnccl -> coll":          "DataTypeOf/RedOpOf map coll's vocabulary onto NCCL's enums; coll imports nothing of symmem (its own row), so no cycle can form",
			"internal/native/libnccl -> internal/wait": "Wait polls a non-blocking communicator with the foundation's one waiting primitive (wait imports only hostmem of the native layer)",
			"internal/native/cudadrv -> internal/wait": "a stream's or event's Wait spins with wait.Poll before it blocks in the driver (wait imports only hostmem of the native layer)",
		}},
	{name: "coll is vocabulary and imports nothing of symmem", pkgs: []string{"coll/..."},
		except: map[string]string{
			"coll/internal/gencodes -> coll": "the generator of include/symmem.h's and Python's code blocks reads coll's lists (a program run by go generate, imported by nothing)",
		}},
	{name: "the public packages below the backends import no backend, no user API, no harness",
		pkgs: []string{"reduce/...", "pool/...", "rendezvous/...", "launch/..."}, allow: join(foundation, public),
		except: map[string]string{
			"pool -> internal/backend/agree": "the agreement's records: Scope.End compares the pool's state as one (Agreer, Disagreement); agree imports no pool (its own row), so the agreement sits below the pool",
		}},
	{name: "doctor is the user API's report types: vocabulary and the pool's stats only", pkgs: []string{"doctor"},
		allow: []string{"coll", "pool"}},
	{name: "auto's table format is vocabulary: coll only (its generator: the table package too)", pkgs: []string{"internal/tune/..."},
		allow: []string{"coll", "internal/tune"}},
	{name: "the backends import nothing above them (user API, harness, programs, launcher)", pkgs: []string{"internal/backend/..."},
		allow: join(foundation, []string{"coll/...", "reduce/...", "pool/...", "rendezvous/...", "internal/backend/...", "internal/tune"}),
		never: []string{"bench/..."}},
	{name: "the agreement subsystem (records, digest, naming a difference) sits below the pool: vocabulary and sentinels only", pkgs: []string{"internal/backend/agree"},
		allow: []string{"coll", "internal/errs"}, never: []string{"pool/...", "internal/backend/shm/...", "internal/backend/cuda/...", "internal/backend/nccl/...", "."}},
	{name: "the user API builds on the backends, never on the harness or the programs", pkgs: []string{"."},
		allow: join(foundation, public, []string{"internal/backend/...", "internal/tune"}),
		never: []string{"bench/...", "cmd/...", "std:image/png"}},
	{name: "the harness drives any target through interfaces: no backend, no user API", pkgs: []string{"bench"},
		allow: []string{"coll", "internal/errs"}},
	{name: "worldtarget runs the harness on the user API, no backend", pkgs: []string{"bench/worldtarget"},
		allow: []string{".", "bench", "coll"},
		except: map[string]string{
			// Issue 23: "a harness-only GEMM helper for the overlap bench is fine".
			"bench/worldtarget -> internal/native/cublas":  "the overlap benchmark's GEMMs (harness only; the user API has no GEMM)",
			"bench/worldtarget -> internal/native/cudadrv": "the overlap benchmark's GEMM streams and events, and the CUDA-graph capture stream (graph.go), on the backend's device (World.Device); the user API takes streams (WithStream) but does not make them",
		}},
	{name: "the programs use the user API and the public packages, no backend", pkgs: []string{"cmd/...", "examples/..."},
		allow: join(public, []string{".", "bench", "bench/worldtarget"}),
		except: map[string]string{
			"cmd/symmem -> internal/tune": "`symmem tune` builds and writes auto's table (the format package: vocabulary, no backend)",
			"cmd/libsymmem -> std:unsafe": "the C ABI's exported functions take C pointers and strings",
		}},
	{name: "this package holds only the test", pkgs: []string{"internal/layers"}},
	{name: "scripts holds only the tests of its table scripts", pkgs: []string{"scripts"}},
}

// pkg is what `go list -json` says of one package.
type pkg struct {
	ImportPath string
	Imports    []string // direct, non-test
	Deps       []string // transitive, non-test
}

// rel is p relative to the module ("." for the root); ok is false outside it.
func rel(p string) (r string, ok bool) {
	switch {
	case p == module:
		return ".", true
	case strings.HasPrefix(p, module+"/"):
		return strings.TrimPrefix(p, module+"/"), true
	}
	return "", false
}

// match reports whether the module-relative path r matches pattern.
func match(pattern, r string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return r == base || strings.HasPrefix(r, base+"/")
	}
	return r == pattern
}

func matchAny(patterns []string, r string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, r) })
}

// violations checks every package against every rule about it and returns
// one line per offending import, the declared exceptions no import used, and
// the packages no rule is about.
func violations(pkgs []pkg, rules []rule) []string {
	var out []string
	used := map[string]bool{}
	for _, p := range pkgs {
		me, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		covered := false
		for _, r := range rules {
			if !matchAny(r.pkgs, me) {
				continue
			}
			covered = true
			for _, imp := range p.Imports {
				ir, ok := rel(imp)
				if !ok && slices.Contains(guardedStd, imp) {
					ir, ok = "std:"+imp, true
				}
				if !ok || matchAny(r.allow, ir) {
					continue
				}
				key := me + " -> " + ir
				if _, ok := r.except[key]; ok {
					used[r.name+"\x00"+key] = true
					continue
				}
				out = append(out, fmt.Sprintf("%s imports %s: rule %q allows only %v", me, ir, r.name, r.allow))
			}
			for _, dep := range p.Deps {
				name := dep
				if ir, ok := rel(dep); ok {
					name = ir
				} else {
					name = "std:" + dep
				}
				if matchAny(r.never, name) {
					out = append(out, fmt.Sprintf("%s depends on %s: rule %q", me, strings.TrimPrefix(name, "std:"), r.name))
				}
			}
		}
		if !covered {
			out = append(out, fmt.Sprintf("%s is under no rule: add it to a row of the layering (internal/layers)", me))
		}
	}
	for _, r := range rules {
		for key := range r.except {
			if !used[r.name+"\x00"+key] {
				out = append(out, fmt.Sprintf("exception %q of rule %q is no longer used: remove it", key, r.name))
			}
		}
	}
	slices.Sort(out)
	return out
}

// load lists every package of the module with its imports (cgo files
// included: CGO_ENABLED=1 whether or not a C compiler is here).
func load(t *testing.T) []pkg {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("needs the go tool to list imports: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-json=ImportPath,Imports,Deps", module+"/...")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOOS=linux", "GOFLAGS=")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages of %s: run the test inside the module", len(pkgs), module)
	}
	return pkgs
}

func TestLayers(t *testing.T) {
	for _, v := range violations(load(t), rules) {
		t.Error(v)
	}
}

// The checker itself: an import upward, an undeclared native import, a
// guarded standard-library import, an unlisted package and a stale exception
// are each reported, naming the import.
func TestViolationsReported(t *testing.T) {
	m := func(r string) string {
		if r == "." {
			return module
		}
		return module + "/" + r
	}
	pkgs := []pkg{
		{ImportPath: m("internal/errs")},
		{ImportPath: m("internal/native/cudadrv"), Imports: []string{m("internal/errs"), m("pool"), "unsafe"}},
		{ImportPath: m("internal/backend/shm"), Imports: []string{m(".")}, Deps: []string{m("."), m("bench")}},
		{ImportPath: m("newthing")},
	}
	rs := []rule{
		{name: "errs", pkgs: []string{"internal/errs"}},
		{name: "native", pkgs: []string{"internal/native/..."}, allow: []string{"internal/errs"},
			except: map[string]string{"internal/native/libnccl -> coll": "gone"}},
		{name: "backends", pkgs: []string{"internal/backend/..."}, allow: []string{"pool"}, never: []string{"bench/..."}},
	}
	got := violations(pkgs, rs)
	want := []string{
		`exception "internal/native/libnccl -> coll" of rule "native" is no longer used: remove it`,
		`internal/backend/shm depends on bench: rule "backends"`,
		`internal/backend/shm imports .: rule "backends" allows only [pool]`,
		`internal/native/cudadrv imports pool: rule "native" allows only [internal/errs]`,
		`internal/native/cudadrv imports std:unsafe: rule "native" allows only [internal/errs]`,
		`newthing is under no rule: add it to a row of the layering (internal/layers)`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
