package symmem

import (
	"errors"
	"fmt"

	"github.com/symmem/symmem/backend"
	"github.com/symmem/symmem/backend/cuda"
	"github.com/symmem/symmem/backend/shm"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/rendezvous"
)

// newBackend creates the backend Options.Backend names. "auto" takes the GPU
// when this rank can use one and the CPU backend otherwise; why says which
// and, for a fallback, what the GPU backend reported.
func newBackend(kind string, env rendezvous.Env, opts Options) (be backend.Backend, why string, err error) {
	copts := cuda.Options{Watchdog: opts.GPUWatchdog, ShareDevice: opts.ShareDevice || env.ShareDevice}
	switch kind {
	case "cpu":
		return shm.New(env), "asked for cpu", nil
	case "cuda":
		b, err := cuda.New(env, copts)
		if err != nil {
			if errors.Is(err, cuda.ErrNotSupported) {
				return nil, "", fmt.Errorf("backend \"cuda\": %w: %w", ErrNotSupported, err)
			}
			return nil, "", fmt.Errorf("backend \"cuda\": %w", err)
		}
		return b, "asked for cuda", nil
	}
	b, err := cuda.New(env, copts)
	if err != nil {
		return shm.New(env), fmt.Sprintf("auto: no usable GPU (%v), CPU shared memory", err), nil
	}
	return b, fmt.Sprintf("auto: GPU %d of this host", b.Device().Ordinal), nil
}

// explainer is implemented by backend groups that choose among several
// algorithms (cuda); the CPU backend has one direct path.
type explainer interface {
	Explain(req backend.Request) coll.Path
}
