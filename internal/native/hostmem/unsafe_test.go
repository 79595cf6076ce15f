package hostmem

import "unsafe"

func unsafeBytesOf(v []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*8)
}

func unsafeBytesOf32(w *uint32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(w)), 4) }
