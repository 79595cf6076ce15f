package symmem

import (
	"fmt"
	"strings"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/cuda"
	"github.com/symmem/symmem/internal/backend/shm"
	"github.com/symmem/symmem/rendezvous"
)

// ResolveBackend turns an Options.Backend value into the backend Init
// starts: "cpu" or "cuda"; "auto" (or "") is "cuda" when this process can
// use a GPU (libcuda loads and a device with VMM and POSIX-fd handles is
// visible) and "cpu" otherwise, with why saying which. Init and the CLI
// both choose with it. An unknown name is ErrInvalid.
func ResolveBackend(name string) (kind, why string, err error) {
	switch strings.ToLower(name) {
	case "cpu":
		return "cpu", "asked for cpu", nil
	case "cuda":
		return "cuda", "asked for cuda", nil
	case "", "auto":
		if err := cuda.Usable(); err != nil {
			return "cpu", fmt.Sprintf("auto: no usable GPU (%v), CPU shared memory", err), nil
		}
		return "cuda", "auto: a usable GPU", nil
	}
	return "", "", fmt.Errorf("unknown backend %q (want \"auto\", \"cpu\" or \"cuda\"): %w", name, ErrInvalid)
}

// newBackend creates the backend ResolveBackend chose. When auto chose the
// GPU but the GPU backend still fails to start, auto falls back to the CPU
// backend and why says what the GPU backend reported.
func newBackend(name string, env rendezvous.Env, opts Options) (be backend.Backend, why string, err error) {
	kind, why, err := ResolveBackend(name)
	if err != nil {
		return nil, "", err
	}
	if kind == "cpu" {
		return shm.New(env), why, nil
	}
	g := opts.GPU
	b, err := cuda.New(env, cuda.Options{Watchdog: g.Watchdog, NCCLMulticast: g.NCCLMulticast, ShareDevice: g.ShareDevice || env.ShareDevice,
		LowContentionCTAs: g.LowContentionCTAs})
	switch {
	case err == nil:
		return b, fmt.Sprintf("%s: GPU %d of this host", why, b.Device().Ordinal), nil
	case strings.EqualFold(name, "cuda"): // errors.Is(err, ErrNotSupported) without a usable GPU
		return nil, "", fmt.Errorf("backend \"cuda\": %w", err)
	}
	return shm.New(env), fmt.Sprintf("auto: the GPU backend failed to start (%v), CPU shared memory", err), nil
}
