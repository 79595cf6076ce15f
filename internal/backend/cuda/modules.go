package cuda

import (
	"embed"
	"errors"
	"fmt"
	"sync"

	"github.com/symmem/symmem/internal/native/cudadrv"
)

// symmem's own kernels (PTX written by internal/ptxgen with the offsets in
// kernel_layout.go; see each file's header for its protocol). The driver
// JIT-compiles them once per process for the device at hand.
//
//go:generate go run ./internal/ptxgen
//go:embed ptx/*.ptx
var ptxFiles embed.FS

// kernelID is a kernel the backend loads: its index in kernelEntries and
// kernelModules.fns.
type kernelID int

// kernelEntry is a kernel: its PTX file under ptx/ and its entry point.
type kernelEntry struct{ ptx, name string }

// kernelEntries are the kernels the backend loads, each declared by the
// file that launches it (declareKernel).
var kernelEntries []kernelEntry

// declareKernel adds entry point name of ptx/file to the kernels the
// backend loads.
func declareKernel(file, name string) kernelID {
	kernelEntries = append(kernelEntries, kernelEntry{file, name})
	return kernelID(len(kernelEntries) - 1)
}

// kernelModules are the backend's loaded modules (once per backend, lazily: the
// JIT costs tens of milliseconds).
type kernelModules struct {
	once sync.Once
	mods []*cudadrv.Module
	fns  []cudadrv.Function // by kernelID
	err  error
}

// fn is kernel id's function (0: not loaded).
func (k *kernelModules) fn(id kernelID) cudadrv.Function {
	if int(id) < len(k.fns) {
		return k.fns[id]
	}
	return 0
}

// load loads the modules into context c, once (the error stays).
func (k *kernelModules) load(c *cudadrv.Context) error {
	k.once.Do(func() {
		fns := make([]cudadrv.Function, len(kernelEntries))
		mods := map[string]*cudadrv.Module{}
		for id, e := range kernelEntries {
			m := mods[e.ptx]
			if m == nil {
				var src []byte
				if src, k.err = ptxFiles.ReadFile("ptx/" + e.ptx); k.err != nil {
					break
				}
				if m, k.err = cudadrv.LoadModule(c, src); k.err != nil {
					break
				}
				mods[e.ptx] = m
				k.mods = append(k.mods, m)
			}
			if fns[id], k.err = m.Function(e.name); k.err != nil {
				break
			}
		}
		if k.err != nil {
			k.unload()
			return
		}
		k.fns = fns
	})
	return k.err
}

// unload unloads the modules loaded.
func (k *kernelModules) unload() error {
	var errs []error
	for _, m := range k.mods {
		errs = append(errs, m.Unload())
	}
	k.mods = nil
	return errors.Join(errs...)
}

// forGroup loads the modules into context c if a group of n ranks may use
// them, and says whether it can (why not: kernWhy).
func (k *kernelModules) forGroup(c *cudadrv.Context, n int) (ok bool, kernWhy string) {
	if n > kernMaxRanks {
		return false, fmt.Sprintf("more than %d ranks", kernMaxRanks)
	}
	if err := k.load(c); err != nil {
		return false, err.Error()
	}
	return true, ""
}
