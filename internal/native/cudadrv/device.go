package cudadrv

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
)

// Device attributes (CUdevice_attribute values) used by symmem.
const (
	AttrMultiprocessorCount = 16
	AttrPCIBusID            = 33
	AttrPCIDeviceID         = 34
	AttrAsyncEngineCount    = 40
	AttrPCIDomainID         = 50
	AttrComputeCapMajor     = 75
	AttrComputeCapMinor     = 76
	AttrVMMSupported        = 102
	AttrPosixFDSupported    = 103
)

// DeviceInfo describes one device.
type DeviceInfo struct {
	Ordinal      int
	Name         string
	SMs          int
	AsyncEngines int // copy engines usable concurrently with kernels
	CC           [2]int
	VMM          bool // virtual memory management (cuMemCreate/Map)
	PosixFD      bool // POSIX fd export of VMM allocations
	PCI          string
}

// P2PLink describes access from one device to another.
type P2PLink struct {
	Access        bool // cuDeviceCanAccessPeer
	NativeAtomics bool // atomics over the link (NVLink; PCIe peers lack them)
	PerfRank      int  // relative performance rank the driver reports
}

// DeviceCount is the number of visible devices.
func DeviceCount() (int, error) {
	if err := Load(); err != nil {
		return 0, err
	}
	return ndev, nil
}

func validDevice(dev int) error {
	if err := Load(); err != nil {
		return err
	}
	if dev < 0 || dev >= ndev {
		return fmt.Errorf("cuda: device %d does not exist (%d visible; check CUDA_VISIBLE_DEVICES and LOCAL_RANK)", dev, ndev)
	}
	return nil
}

// Attr reads one device attribute.
func Attr(dev, attr int) (int, error) {
	if err := validDevice(dev); err != nil {
		return 0, err
	}
	var v C.int
	if err := check("cuDeviceGetAttribute", C.symc_device_attr(C.int(dev), C.int(attr), &v)); err != nil {
		return 0, fmt.Errorf("cuda: attribute %d of device %d: %w", attr, dev, err)
	}
	return int(v), nil
}

// Info describes device dev.
func Info(dev int) (DeviceInfo, error) {
	if err := validDevice(dev); err != nil {
		return DeviceInfo{}, err
	}
	var buf [256]C.char
	if err := check("cuDeviceGetName", C.symc_device_name(C.int(dev), &buf[0], C.int(len(buf)))); err != nil {
		return DeviceInfo{}, err
	}
	d := DeviceInfo{Ordinal: dev, Name: C.GoString(&buf[0])}
	vals := map[int]int{}
	for _, a := range []int{AttrMultiprocessorCount, AttrAsyncEngineCount, AttrComputeCapMajor, AttrComputeCapMinor,
		AttrVMMSupported, AttrPosixFDSupported, AttrPCIBusID, AttrPCIDeviceID, AttrPCIDomainID} {
		v, err := Attr(dev, a)
		if err != nil {
			return DeviceInfo{}, err
		}
		vals[a] = v
	}
	d.SMs, d.AsyncEngines = vals[AttrMultiprocessorCount], vals[AttrAsyncEngineCount]
	d.CC = [2]int{vals[AttrComputeCapMajor], vals[AttrComputeCapMinor]}
	d.VMM, d.PosixFD = vals[AttrVMMSupported] != 0, vals[AttrPosixFDSupported] != 0
	d.PCI = fmt.Sprintf("%04x:%02x:%02x.0", vals[AttrPCIDomainID], vals[AttrPCIBusID], vals[AttrPCIDeviceID])
	return d, nil
}

// P2P reports how device a can reach device b (a == b is always accessible).
func P2P(a, b int) (P2PLink, error) {
	if err := validDevice(a); err != nil {
		return P2PLink{}, err
	}
	if err := validDevice(b); err != nil {
		return P2PLink{}, err
	}
	if a == b {
		return P2PLink{Access: true, NativeAtomics: true}, nil
	}
	var can, at, rank C.int
	if err := check("cuDeviceCanAccessPeer", C.symc_p2p(C.int(a), C.int(b), &can, &at, &rank)); err != nil {
		return P2PLink{}, fmt.Errorf("cuda: peer access %d->%d: %w", a, b, err)
	}
	return P2PLink{Access: can != 0, NativeAtomics: at != 0, PerfRank: int(rank)}, nil
}

// P2PMatrix returns P2P(a, b) for every pair of visible devices.
func P2PMatrix() ([][]P2PLink, error) {
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	m := make([][]P2PLink, n)
	for a := range m {
		m[a] = make([]P2PLink, n)
		for b := range m[a] {
			if m[a][b], err = P2P(a, b); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Context is a retained primary context of one device. It is a plain handle:
// every call that takes it makes it current on the calling thread itself.
type Context struct {
	Dev int
	h   C.CUcontext
}

var (
	ctxMu   sync.Mutex
	ctxs    = map[int]*Context{}
	ctxRefs = map[int]int{}
)

// Retain returns the primary context of dev (the one NCCL and the CUDA
// runtime use), retaining it once per Retain call; Release undoes one.
func Retain(dev int) (*Context, error) {
	if err := validDevice(dev); err != nil {
		return nil, err
	}
	ctxMu.Lock()
	defer ctxMu.Unlock()
	if c, ok := ctxs[dev]; ok {
		ctxRefs[dev]++
		return c, nil
	}
	var h C.CUcontext
	if err := check("cuDevicePrimaryCtxRetain", C.symc_primary_ctx(C.int(dev), &h)); err != nil {
		return nil, fmt.Errorf("cuda: primary context of device %d: %w", dev, err)
	}
	c := &Context{Dev: dev, h: h}
	ctxs[dev], ctxRefs[dev] = c, 1
	return c, nil
}

// Release drops one reference taken by Retain; the last one releases the
// primary context.
func (c *Context) Release() error {
	ctxMu.Lock()
	defer ctxMu.Unlock()
	if ctxRefs[c.Dev] == 0 {
		return fmt.Errorf("cuda: context of device %d released more often than retained", c.Dev)
	}
	ctxRefs[c.Dev]--
	if ctxRefs[c.Dev] > 0 {
		return nil
	}
	delete(ctxs, c.Dev)
	delete(ctxRefs, c.Dev)
	return check("cuDevicePrimaryCtxRelease", C.symc_primary_ctx_release(C.int(c.Dev)))
}

// Handle is the raw CUcontext, for other native bindings.
func (c *Context) Handle() uint64 { return uint64(uintptr(c.h)) }

// MemInfo returns free and total device memory.
func (c *Context) MemInfo() (free, total int64, err error) {
	var f, t C.size_t
	if err := check("cuMemGetInfo", C.symc_mem_info(c.h, &f, &t)); err != nil {
		return 0, 0, err
	}
	return int64(f), int64(t), nil
}

// Synchronize waits for all work of the context (setup and tests only).
func (c *Context) Synchronize() error {
	return check("cuCtxSynchronize", C.symc_ctx_sync(c.h))
}
