package main

// #include <stdint.h>
import "C"

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"time"
	"unsafe"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/rendezvous"
)

const abiVersion = 4 // SYMMEM_ABI_VERSION

const initChecked = 1 // SYMMEM_INIT_CHECKED

// maxTimeoutMs is the largest timeout_ms a time.Duration holds.
const maxTimeoutMs = math.MaxInt64 / int64(time.Millisecond)

//export symmem_abi_version
func symmem_abi_version() C.int { return abiVersion }

// options builds Init's options from the C arguments.
func options(backend *C.char, timeoutMs C.int64_t, flags C.int) (symmem.Options, error) {
	var o symmem.Options
	if backend != nil {
		o.Backend = C.GoString(backend)
	}
	if timeoutMs < 0 {
		return o, fmt.Errorf("symmem_init: timeout_ms %d is negative (0 means the default, %v): %w", timeoutMs, symmem.DefaultTimeout, symmem.ErrInvalid)
	}
	if int64(timeoutMs) > maxTimeoutMs {
		return o, fmt.Errorf("symmem_init: timeout_ms %d is above the maximum %d (about 292 years): pass a smaller one, or 0 for the default (%v): %w", timeoutMs, maxTimeoutMs, symmem.DefaultTimeout, symmem.ErrInvalid)
	}
	o.Timeout = time.Duration(timeoutMs) * time.Millisecond
	if flags&^initChecked != 0 {
		return o, fmt.Errorf("symmem_init: unknown flags %#x (known: SYMMEM_INIT_CHECKED=1): %w", int(flags), symmem.ErrInvalid)
	}
	o.Checked = flags&initChecked != 0
	return o, nil
}

// start initialises a world and stores its handle in *out.
func start(opts symmem.Options, out *C.uint64_t) C.int {
	if out == nil {
		return fail(fmt.Errorf("symmem_init: world is NULL (pass the address of a symmem_world_t): %w", symmem.ErrInvalid))
	}
	syncEnvForInit()
	sw, err := symmem.Init(context.Background(), opts)
	if err != nil {
		return fail(err)
	}
	w := &world{w: sw}
	w.id = handles.add(w)
	w.group = handles.add(&group{w: w, g: sw.World()})
	_ = w.own(w.group) // a new world: not dropped
	worlds.open(w)
	*out = C.uint64_t(w.id)
	return statusOK
}

//export symmem_init
func symmem_init(backend *C.char, timeoutMs C.int64_t, flags C.int, out *C.uint64_t) C.int {
	opts, err := options(backend, timeoutMs, flags)
	if err != nil {
		return fail(err)
	}
	return start(opts, out)
}

//export symmem_init_explicit
func symmem_init_explicit(rank, worldSize, localRank, localWorldSize C.int, masterAddr *C.char, masterPort C.int,
	token, jobID, backend *C.char, timeoutMs C.int64_t, flags C.int, out *C.uint64_t) C.int {
	opts, err := options(backend, timeoutMs, flags)
	if err != nil {
		return fail(err)
	}
	env := rendezvous.Env{Rank: int(rank), WorldSize: int(worldSize), LocalRank: int(localRank), LocalWorldSize: int(localWorldSize),
		MasterAddr: goString(masterAddr), MasterPort: int(masterPort), Token: goString(token), JobID: goString(jobID),
		StorePort: int(masterPort) + 1} // as from the environment: rank 0's store is on MASTER_PORT+1
	// NULL token or job id: from the environment, as symmem_init takes
	// them (SYMMEM_TOKEN, or derived under torchrun; SYMMEM_JOB_ID, or
	// derived from the token).
	if token == nil || jobID == nil {
		syncEnvForInit()
		envSynced.Store(true) // start need not read it again
	}
	if token == nil {
		if v := strings.TrimSpace(os.Getenv(rendezvous.VarToken)); v != "" {
			env.Token = v
		} else if run := strings.TrimSpace(os.Getenv(rendezvous.VarRunID)); run != "" && env.MasterAddr != "" {
			env.Token = rendezvous.DerivedToken(run, env.MasterAddr, env.MasterPort)
		}
	}
	if jobID == nil {
		if v := strings.TrimSpace(os.Getenv(rendezvous.VarJobID)); v != "" {
			env.JobID = v
		} else if env.Token != "" {
			env.JobID = rendezvous.DerivedJobID(env.Token)
		}
	}
	if err := checkEnv(env); err != nil {
		return fail(err)
	}
	opts.Env = &env
	return start(opts, out)
}

func goString(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// checkEnv names what is wrong with explicit init arguments.
func checkEnv(e rendezvous.Env) error {
	var prob string
	switch {
	case e.WorldSize < 1:
		prob = fmt.Sprintf("world_size %d is not positive", e.WorldSize)
	case e.Rank < 0 || e.Rank >= e.WorldSize:
		prob = fmt.Sprintf("rank %d is outside [0, world_size=%d)", e.Rank, e.WorldSize)
	case e.LocalWorldSize < 1 || e.LocalWorldSize > e.WorldSize:
		prob = fmt.Sprintf("local_world_size %d is outside [1, world_size=%d]", e.LocalWorldSize, e.WorldSize)
	case e.LocalRank < 0 || e.LocalRank >= e.LocalWorldSize:
		prob = fmt.Sprintf("local_rank %d is outside [0, local_world_size=%d)", e.LocalRank, e.LocalWorldSize)
	case e.MasterAddr == "":
		prob = "master_addr is empty"
	case e.MasterPort < 1 || e.MasterPort > 65534:
		prob = fmt.Sprintf("master_port %d is outside [1, 65534] (rank 0 hosts symmem's store on master_port+1)", e.MasterPort)
	case e.Token == "":
		prob = "token is empty (every rank passes the same job token; NULL: SYMMEM_TOKEN, or TORCHELASTIC_RUN_ID under torchrun)"
	case e.JobID == "":
		prob = "job_id is empty (every rank passes the same job id)"
	default:
		return nil
	}
	return fmt.Errorf("symmem_init_explicit: %s: %w", prob, symmem.ErrInvalid)
}

//export symmem_world_close
func symmem_world_close(wh C.uint64_t) C.int {
	w, err := lookup[*world](uint64(wh), "world")
	if err != nil {
		return fail(err)
	}
	w.close.Lock()
	defer w.close.Unlock()
	if _, err := lookup[*world](uint64(wh), "world"); err != nil {
		return fail(err) // closed on another thread meanwhile: SYMMEM_ERR_BAD_HANDLE, as a second close in sequence
	}
	w.drop()
	if err := w.w.Close(); err != nil {
		return fail(err)
	}
	return statusOK
}

//export symmem_world_rank
func symmem_world_rank(wh C.uint64_t) C.int {
	w, err := lookup[*world](uint64(wh), "world")
	if err != nil {
		return fail(err)
	}
	return C.int(w.w.Rank())
}

//export symmem_world_size
func symmem_world_size(wh C.uint64_t) C.int {
	w, err := lookup[*world](uint64(wh), "world")
	if err != nil {
		return fail(err)
	}
	return C.int(w.w.Size())
}

//export symmem_world_device
func symmem_world_device(wh C.uint64_t, out *C.int) C.int {
	w, err := lookup[*world](uint64(wh), "world")
	if err != nil {
		return fail(err)
	}
	if out == nil {
		return fail(fmt.Errorf("symmem_world_device: device is NULL: %w", symmem.ErrInvalid))
	}
	*out = C.int(w.w.Device())
	return statusOK
}

//export symmem_world_backend
func symmem_world_backend(wh C.uint64_t, buf *C.char, capacity C.size_t) C.int {
	w, err := lookup[*world](uint64(wh), "world")
	if err != nil {
		return fail(err)
	}
	return put(buf, capacity, w.w.Backend())
}

//export symmem_synchronize
func symmem_synchronize(wh C.uint64_t) C.int {
	w, err := lookup[*world](uint64(wh), "world")
	if err != nil {
		return fail(err)
	}
	if err := w.w.Synchronize(context.Background()); err != nil {
		return fail(err)
	}
	return statusOK
}

//export symmem_world_group
func symmem_world_group(wh C.uint64_t, out *C.uint64_t) C.int {
	w, err := lookup[*world](uint64(wh), "world")
	if err != nil {
		return fail(err)
	}
	if out == nil {
		return fail(fmt.Errorf("symmem_world_group: group is NULL: %w", symmem.ErrInvalid))
	}
	*out = C.uint64_t(w.group)
	return statusOK
}

//export symmem_group_new
func symmem_group_new(wh C.uint64_t, name *C.char, ranks *C.int, nranks C.int, out *C.uint64_t) C.int {
	w, err := lookup[*world](uint64(wh), "world")
	if err != nil {
		return fail(err)
	}
	if out == nil || name == nil || nranks < 0 || (nranks > 0 && ranks == nil) {
		return fail(fmt.Errorf("symmem_group_new: name, ranks (with nranks >= 0) and group must be given: %w", symmem.ErrInvalid))
	}
	rs := make([]int, nranks)
	for i, r := range unsafe.Slice(ranks, int(nranks)) {
		rs[i] = int(r)
	}
	g, err := w.w.NewGroup(context.Background(), C.GoString(name), rs)
	if err != nil {
		return fail(err)
	}
	h := handles.add(&group{w: w, g: g})
	if err := w.own(h); err != nil {
		return fail(fmt.Errorf("symmem_group_new: %w", err))
	}
	*out = C.uint64_t(h)
	return statusOK
}

//export symmem_group_close
func symmem_group_close(gh C.uint64_t) C.int {
	g, err := lookup[*group](uint64(gh), "group")
	if err != nil {
		return fail(err)
	}
	if uint64(gh) == g.w.group {
		return fail(fmt.Errorf("symmem_group_close: the world group closes with the world (symmem_world_close): %w", symmem.ErrInvalid))
	}
	g.close.Lock()
	defer g.close.Unlock()
	if _, err := lookup[*group](uint64(gh), "group"); err != nil {
		return fail(err) // closed on another thread meanwhile: SYMMEM_ERR_BAD_HANDLE, as a second close in sequence
	}
	if err := g.g.Close(context.Background()); err != nil {
		return fail(err)
	}
	handles.remove(uint64(gh))
	g.w.disown(uint64(gh))
	return statusOK
}

//export symmem_group_rank
func symmem_group_rank(gh C.uint64_t) C.int {
	g, err := lookup[*group](uint64(gh), "group")
	if err != nil {
		return fail(err)
	}
	return C.int(g.g.Rank())
}

//export symmem_group_size
func symmem_group_size(gh C.uint64_t) C.int {
	g, err := lookup[*group](uint64(gh), "group")
	if err != nil {
		return fail(err)
	}
	return C.int(g.g.Size())
}

// put writes s into buf (NUL-terminated, cut to capacity) and returns its
// full length, like snprintf.
func put(buf *C.char, capacity C.size_t, s string) C.int {
	if buf != nil && capacity > 0 {
		// Span only the bytes written: callers may pass SIZE_MAX for "big
		// enough", more than a slice can span.
		dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(min(uint64(capacity), uint64(len(s))+1)))
		n := copy(dst[:len(dst)-1], s)
		dst[n] = 0
	}
	return C.int(len(s))
}
