package libnccl

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/symmem/symmem/internal/native/dl"
)

// Lib is one loaded libnccl.so.2 with its resolved entry points.
type Lib struct {
	Path        string   // the candidate that loaded (as given to dlopen)
	Version     int      // ncclGetVersion, e.g. 22803
	HasWindows  bool     // ncclCommWindowRegister and ncclCommWindowDeregister exist
	HasCUDA     bool     // cuCtxSetCurrent was resolved from libcuda.so.1
	HasRevoke   bool     // ncclCommRevoke exists (2.28+)
	HasAllToAll bool     // ncclAlltoAll exists (2.28+)
	HasSendRecv bool     // ncclSend, ncclRecv, ncclGroupStart and ncclGroupEnd exist (2.7+)
	Tried       []string // "candidate: why it failed", for those tried before Path

	c *C.sm_nccl // C memory, never freed (the library stays loaded)
}

// VersionString is Version as "2.28.3".
func (l *Lib) VersionString() string { return VersionString(l.Version) }

func (l *Lib) String() string {
	return fmt.Sprintf("%s (NCCL %s, windows=%v)", l.Path, l.VersionString(), l.HasWindows)
}

var (
	loadOnce sync.Once
	loadLib  *Lib
	loadErr  error
)

// Load finds and loads NCCL once per process (see Candidates for the
// order) and returns the same result on every call. It does not touch the
// environment: NCCL reads its NCCL_* variables when it first needs them, so
// a caller that sets one does so before Load.
func Load() (*Lib, error) {
	loadOnce.Do(func() {
		loadLib, loadErr = Open(Candidates(os.Getenv, filepath.Glob))
		if loadErr != nil && os.Getenv(EnvLib) == "" {
			loadErr = fmt.Errorf("%w (site-packages searched: $VIRTUAL_ENV, %s)", loadErr, strings.Join(SitePatterns, ", "))
		}
	})
	return loadLib, loadErr
}

// Open tries each candidate in order and returns the first that loads with
// every required symbol. The error matches errs.NotSupported and lists every
// path tried with its reason.
func Open(candidates []string) (*Lib, error) {
	var tried []string
	for _, p := range candidates {
		cl, err := open(p)
		if err != nil {
			tried = append(tried, err.Error())
			continue
		}
		l := &Lib{Path: p, Tried: tried, c: cl}
		var v C.int
		if r := C.sm_version(cl, &v); r != 0 {
			tried = append(tried, fmt.Sprintf("%s: ncclGetVersion returned %d", p, int(r)))
			continue // handle stays open: harmless, and dlclose of NCCL is unsafe
		}
		l.Version = int(v)
		l.HasWindows = C.sm_has(cl, 0) != 0
		l.HasCUDA = C.sm_has(cl, 2) != 0
		l.HasRevoke = C.sm_has(cl, 4) != 0
		l.HasAllToAll = C.sm_has(cl, 5) != 0
		l.HasSendRecv = C.sm_has(cl, 6) != 0
		return l, nil
	}
	if len(candidates) == 0 {
		return nil, notSupported("libnccl.so.2 not found: no candidates to try")
	}
	return nil, notSupported("libnccl.so.2 not found or unusable (tried %s); set %s=/path/to/libnccl.so.2 or install the nvidia-nccl wheel",
		strings.Join(tried, "; "), EnvLib)
}

// open loads the library at p and binds its entry points (and, for
// cuCtxSetCurrent, the CUDA driver's: NCCL has normally loaded it already).
// The error names p and what is missing.
func open(p string) (*C.sm_nccl, error) {
	lib, err := dl.Open(p)
	if err != nil {
		return nil, err
	}
	cl := (*C.sm_nccl)(C.calloc(1, C.sizeof_sm_nccl))
	slot := func(f **[0]byte) *unsafe.Pointer { return (*unsafe.Pointer)(unsafe.Pointer(f)) }
	err = lib.Bind([]dl.Sym{
		{Slot: slot(&cl.getVersion), Names: []string{"ncclGetVersion"}, Required: true},
		{Slot: slot(&cl.getUniqueId), Names: []string{"ncclGetUniqueId"}, Required: true},
		{Slot: slot(&cl.commInitRankConfig), Names: []string{"ncclCommInitRankConfig"}, Required: true},
		{Slot: slot(&cl.commFinalize), Names: []string{"ncclCommFinalize"}, Required: true},
		{Slot: slot(&cl.commDestroy), Names: []string{"ncclCommDestroy"}, Required: true},
		{Slot: slot(&cl.commAbort), Names: []string{"ncclCommAbort"}, Required: true},
		{Slot: slot(&cl.commGetAsyncError), Names: []string{"ncclCommGetAsyncError"}, Required: true},
		{Slot: slot(&cl.getErrorString), Names: []string{"ncclGetErrorString"}, Required: true},
		{Slot: slot(&cl.allGather), Names: []string{"ncclAllGather"}, Required: true},
		{Slot: slot(&cl.reduceScatter), Names: []string{"ncclReduceScatter"}, Required: true},
		{Slot: slot(&cl.allReduce), Names: []string{"ncclAllReduce"}, Required: true},
		{Slot: slot(&cl.broadcast), Names: []string{"ncclBroadcast"}, Required: true},
		{Slot: slot(&cl.getLastError), Names: []string{"ncclGetLastError"}},
		{Slot: slot(&cl.winRegister), Names: []string{"ncclCommWindowRegister"}},
		{Slot: slot(&cl.winDeregister), Names: []string{"ncclCommWindowDeregister"}},
		{Slot: slot(&cl.commRevoke), Names: []string{"ncclCommRevoke"}},
		{Slot: slot(&cl.allToAll), Names: []string{"ncclAlltoAll"}},
		{Slot: slot(&cl.send), Names: []string{"ncclSend"}},
		{Slot: slot(&cl.recv), Names: []string{"ncclRecv"}},
		{Slot: slot(&cl.groupStart), Names: []string{"ncclGroupStart"}},
		{Slot: slot(&cl.groupEnd), Names: []string{"ncclGroupEnd"}},
	})
	if err != nil {
		lib.Close()
		C.free(unsafe.Pointer(cl))
		return nil, err
	}
	if cuda, err := dl.Open("libcuda.so.1"); err == nil { // optional: HasCUDA reports it
		*slot(&cl.cuCtxSetCurrent) = cuda.Sym("cuCtxSetCurrent")
	}
	return cl, nil
}

// ConfigLayout returns sizeof and offsetof of the hand-declared C types as
// compiled: [sizeof(ncclConfig_t), offsetof(magic), offsetof(version),
// blocking, cgaClusterSize, minCTAs, maxCTAs, netName, splitShare,
// trafficClass, commName, collnetEnable, CTAPolicy, shrinkShare, nvlsCTAs,
// nChannelsPerNetPeer, nvlinkCentricSched, sizeof(ncclUniqueId)].
func ConfigLayout() [18]int {
	var o [18]C.size_t
	C.sm_config_layout(&o[0])
	var out [18]int
	for i, v := range o {
		out[i] = int(v)
	}
	return out
}

// ConfigVersion is the ncclConfig_t.version we declare: the layout above is
// NCCL 2.28's, and NCCL copies min(size, its own sizeof) bytes and ignores
// fields newer than the declared version.
const ConfigVersion = 22803

// err builds an *Error for rc returned by call (rc < 0: CUDA error of
// cuCtxSetCurrent). comm may be 0.
func (l *Lib) err(call string, rc C.int, comm Comm) error {
	if rc < 0 {
		return &Error{Call: "cuCtxSetCurrent (before " + call + ")", Code: int(-rc), CUDA: true}
	}
	e := &Error{Call: call, Code: int(rc), Msg: C.GoString(C.sm_error_string(l.c, rc))}
	if comm != 0 {
		if s := C.sm_last_error(l.c, C.uintptr_t(comm)); s != nil {
			e.Detail = C.GoString(s)
		}
	}
	return e
}

// IsInProgress reports whether err is NCCL's ncclInProgress: the call was
// accepted on a non-blocking communicator and must be waited for (Wait)
// before the next NCCL call on it.
func IsInProgress(err error) bool {
	e, ok := err.(*Error)
	return ok && !e.CUDA && e.Code == int(InProgress)
}

func (l *Lib) needCtx(ctx uintptr) error {
	if ctx != 0 && !l.HasCUDA {
		return notSupported("cuCtxSetCurrent unavailable (libcuda.so.1 not loadable); cannot make the CUDA context current")
	}
	return nil
}
