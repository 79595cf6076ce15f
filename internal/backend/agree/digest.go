package agree

import (
	"encoding/binary"
	"fmt"

	"github.com/symmem/symmem/coll"
)

// Digest folds a call (its record and path) into the 32-bit digest that
// symmem's GPU kernels carry in-band: ranks that force other algorithms,
// or whose arguments make auto choose differently, launch different
// kernels that must not pair up (they share one signal region). It mixes
// each word in whole (a bijection of the state per word, so records that
// differ in one word differ before the final fold): several times faster
// than byte-wise FNV-1a, and only the hosts compute it. Its values are part of
// the GPU programs (the golden net pins them): change it only with them.
func Digest(c Call) uint32 {
	h := FoldRecord(0x243f6a8885a308d3, c.Record)
	for i := 0; i < len(c.Path); i++ {
		h = (h ^ uint64(c.Path[i])) * mixMul
	}
	return uint32(h ^ h>>32)
}

// mixMul is the odd multiplier of the word mixing (2^64 / golden ratio).
const mixMul = 0x9e3779b97f4a7c15

// FoldRecord mixes rec's words into h, each in whole (a bijection of the
// state per word): Digest's step, and the call log's running hash
// (members.CallLog).
func FoldRecord(h uint64, rec Record) uint64 {
	for _, w := range rec {
		h = (h ^ w) * mixMul
		h ^= h >> 29
	}
	return h
}

// RecordBytes is the size of a record in its store encoding.
const RecordBytes = 8 * len(Record{})

// Append appends c's store encoding to b: the record's words (little
// endian), then the path's bytes. Checked mode's exchange and the GPU
// backend's swap of two reported calls carry it.
func (c Call) Append(b []byte) []byte {
	for _, w := range c.Record {
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	return append(b, c.Path...)
}

// DecodeCall reads a call's store encoding (Append).
func DecodeCall(b []byte) (Call, error) {
	var c Call
	if len(b) < RecordBytes {
		return c, fmt.Errorf("a record of %d bytes", len(b))
	}
	for i := range c.Record {
		c.Record[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	c.Path = coll.Algo(b[RecordBytes:])
	return c, nil
}

// algos is coll.Algos, read once: PathCode runs on every call.
var algos = coll.Algos()

// PathCode is path a's code in a gate entry (its place in coll.Algos, from
// 1; 0 for a path it does not know).
func PathCode(a coll.Algo) uint8 {
	for i, x := range algos {
		if x == a {
			return uint8(i + 1)
		}
	}
	return 0
}

// PathOf is the path with gate code c (PathCode).
func PathOf(c uint8) coll.Algo {
	if c >= 1 && int(c) <= len(algos) {
		return algos[c-1]
	}
	return coll.Algo(fmt.Sprintf("path %d", c))
}
