package hostmem

import "unsafe"

// Word is an element type that View and AsBytes can reinterpret: fixed-size
// numbers without pointers, so any bit pattern is a valid value.
type Word interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// View reinterprets b as a slice of T in the host's byte order (little-endian
// on every platform symmem supports), sharing b's memory. ok is false, and
// the slice nil, when len(b) is not a multiple of T's size or b's first byte
// is not aligned to T's size: callers then fall back to copying (see package
// reduce). An empty b gives an empty, ok view.
func View[T Word](b []byte) (v []T, ok bool) {
	var z T
	size := int(unsafe.Sizeof(z))
	if len(b)%size != 0 {
		return nil, false
	}
	if len(b) == 0 {
		return []T{}, true
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%uintptr(size) != 0 {
		return nil, false
	}
	return unsafe.Slice((*T)(p), len(b)/size), true
}

// AsBytes reinterprets v as its bytes in the host's byte order, sharing v's
// memory.
func AsBytes[T Word](v []T) []byte {
	if len(v) == 0 {
		return []byte{}
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(z)))
}
