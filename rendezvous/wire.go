package rendezvous

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Wire format. A frame is a big-endian uint32 body length followed by the body:
//
//	op    uint8
//	num   int64           (delta, timeout in ms, counter result, ...)
//	nkeys uint32, then nkeys × (uint32 len, bytes)
//	nvals uint32, then nvals × (uint32 len, bytes)
//
// Requests and responses share the layout; op says which it is.
const (
	maxFrame  = 64 << 20 // largest body accepted, bytes
	readChunk = 64 << 10 // what readMsg allocates before a body's bytes arrive
	maxItems  = 1 << 16  // largest key or value count per frame
	minBody   = 1 + 8 + 4 + 4
)

// Request ops.
const (
	opHello  byte = 1 // vals[0] = token
	opSet    byte = 2 // keys[0], vals[0]
	opGet    byte = 3 // keys[0]
	opAdd    byte = 4 // keys[0], num = delta
	opCAS    byte = 5 // keys[0], vals[0] = old, vals[1] = new
	opWait   byte = 6 // keys..., num = timeout in ms
	opDelete byte = 7 // keys[0]
	// opPresence makes the connection a rank's presence (presence.go):
	// keys[0] its own key, keys[1] the job's gone list, vals[0] the value
	// they get if the connection ends without opLeave.
	opPresence byte = 8
	opLeave    byte = 9 // the presence ends cleanly: set nothing
	opLastReq       = opLeave
)

// Response ops.
const (
	respOK       byte = 100 // vals/num carry the result
	respNotFound byte = 101
	respTimeout  byte = 102 // keys = the keys still missing
	respError    byte = 103 // vals[0] = message
	respRefused  byte = 104 // token refused
)

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("rendezvous: malformed frame")

type msg struct {
	op   byte
	num  int64
	keys []string
	vals [][]byte
}

// encode appends the framed message to dst.
func (m *msg) encode(dst []byte) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = append(dst, m.op)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.num))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.keys)))
	for _, k := range m.keys {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(k)))
		dst = append(dst, k...)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.vals)))
	for _, v := range m.vals {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
		dst = append(dst, v...)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// decodeBody parses one frame body (without the length prefix). It never
// panics; any inconsistency is an error wrapping ErrMalformed.
func decodeBody(b []byte) (msg, error) {
	var m msg
	if len(b) < minBody {
		return m, fmt.Errorf("%w: body is %d bytes, need at least %d", ErrMalformed, len(b), minBody)
	}
	m.op = b[0]
	m.num = int64(binary.BigEndian.Uint64(b[1:9]))
	b = b[9:]
	items := func(what string) ([][]byte, error) {
		if len(b) < 4 {
			return nil, fmt.Errorf("%w: truncated %s count", ErrMalformed, what)
		}
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		if n > maxItems {
			return nil, fmt.Errorf("%w: %d %s exceeds the limit of %d", ErrMalformed, n, what, maxItems)
		}
		// Each item needs at least its 4-byte length: reject impossible counts
		// before allocating.
		if uint64(n)*4 > uint64(len(b)) {
			return nil, fmt.Errorf("%w: %d %s do not fit in %d bytes", ErrMalformed, n, what, len(b))
		}
		out := make([][]byte, n)
		for i := range out {
			if len(b) < 4 {
				return nil, fmt.Errorf("%w: truncated length of %s %d", ErrMalformed, what, i)
			}
			l := binary.BigEndian.Uint32(b)
			b = b[4:]
			if uint64(l) > uint64(len(b)) {
				return nil, fmt.Errorf("%w: %s %d claims %d bytes, %d left", ErrMalformed, what, i, l, len(b))
			}
			out[i] = b[:l:l]
			b = b[l:]
		}
		return out, nil
	}
	keys, err := items("keys")
	if err != nil {
		return msg{}, err
	}
	vals, err := items("values")
	if err != nil {
		return msg{}, err
	}
	if len(b) != 0 {
		return msg{}, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(b))
	}
	m.keys = make([]string, len(keys))
	for i, k := range keys {
		m.keys[i] = string(k)
	}
	m.vals = make([][]byte, len(vals))
	for i, v := range vals {
		m.vals[i] = bytes.Clone(v)
	}
	return m, nil
}

// Decode parses one complete frame (length prefix included) from b and
// returns the number of bytes it used. It is the entry point of FuzzDecode.
func decode(b []byte) (msg, int, error) {
	if len(b) < 4 {
		return msg{}, 0, fmt.Errorf("%w: %d bytes, need a 4-byte length", ErrMalformed, len(b))
	}
	n := binary.BigEndian.Uint32(b)
	if n > maxFrame {
		return msg{}, 0, fmt.Errorf("%w: frame of %d bytes exceeds the limit of %d", ErrMalformed, n, maxFrame)
	}
	if uint64(n) > uint64(len(b)-4) {
		return msg{}, 0, fmt.Errorf("%w: frame claims %d bytes, %d present", ErrMalformed, n, len(b)-4)
	}
	m, err := decodeBody(b[4 : 4+n])
	if err != nil {
		return msg{}, 0, err
	}
	return m, int(4 + n), nil
}

// readMsg reads one frame of at most limit body bytes from r.
func readMsg(r io.Reader, limit uint32) (msg, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return msg{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > limit {
		return msg{}, fmt.Errorf("%w: frame of %d bytes exceeds the limit of %d", ErrMalformed, n, limit)
	}
	// Grow the body as its bytes arrive, doubling from readChunk: a header
	// alone must not make the reader allocate the size it declares.
	body := make([]byte, min(n, readChunk))
	for off := 0; ; {
		if _, err := io.ReadFull(r, body[off:]); err != nil {
			return msg{}, fmt.Errorf("%w: truncated frame: %w", ErrMalformed, err)
		}
		if len(body) == int(n) {
			return decodeBody(body)
		}
		off = len(body)
		grown := make([]byte, min(2*off, int(n)))
		copy(grown, body)
		body = grown
	}
}

func writeMsg(w io.Writer, m *msg) error {
	_, err := w.Write(m.encode(nil))
	return err
}
