package rendezvous

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

func TestWireRoundTrip(t *testing.T) {
	cases := []msg{
		{op: opSet, keys: []string{"a"}, vals: [][]byte{[]byte("v")}},
		{op: opWait, num: 1500, keys: []string{"x", "y", ""}, vals: [][]byte{}},
		{op: opAdd, num: -7, keys: []string{"ctr"}, vals: [][]byte{}},
		{op: respOK, keys: []string{}, vals: [][]byte{{}, bytes.Repeat([]byte{0xff}, 1000)}},
	}
	for _, m := range cases {
		b := m.encode(nil)
		got, n, err := decode(b)
		if err != nil || n != len(b) {
			t.Fatalf("decode(%+v): n=%d err=%v", m, n, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip: got %+v want %+v", got, m)
		}
	}
}

func TestWireMalformed(t *testing.T) {
	good := (&msg{op: opSet, keys: []string{"k"}, vals: [][]byte{[]byte("v")}}).encode(nil)
	huge := binary.BigEndian.AppendUint32(nil, maxFrame+1)
	manyKeys := (&msg{op: opGet}).encode(nil)
	binary.BigEndian.PutUint32(manyKeys[4+9:], 1<<30)
	longKey := (&msg{op: opGet, keys: []string{"k"}}).encode(nil)
	binary.BigEndian.PutUint32(longKey[4+13:], 1000)
	trailing := append(bytes.Clone(good), 0)
	binary.BigEndian.PutUint32(trailing, uint32(len(trailing)-4))
	cases := map[string][]byte{
		"empty":         nil,
		"short length":  {0, 0},
		"too big":       huge,
		"truncated":     good[:len(good)-1],
		"short body":    {0, 0, 0, 3, 1, 2, 3},
		"too many keys": manyKeys,
		"key past end":  longKey,
		"trailing byte": trailing,
	}
	for name, b := range cases {
		if _, _, err := decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add((&msg{op: opSet, keys: []string{"k"}, vals: [][]byte{[]byte("v")}}).encode(nil))
	f.Add((&msg{op: opWait, num: 10, keys: []string{"a", "b"}}).encode(nil))
	f.Add((&msg{op: opCAS, keys: []string{"k"}, vals: [][]byte{nil, []byte("n")}}).encode(nil))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Add([]byte{0, 0, 0, 17, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, n, err := decode(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		// A frame that decodes must re-encode to the same bytes.
		if re := m.encode(nil); !bytes.Equal(re, b[:n]) {
			t.Fatalf("re-encode differs:\n got %x\nwant %x", re, b[:n])
		}
		// And readMsg (the server's path) must agree.
		if _, err := readMsg(bytes.NewReader(b[:n]), maxFrame); err != nil {
			t.Fatalf("readMsg rejects what decode accepts: %v", err)
		}
	})
}

// TestReadMsgAllocatesAsBytesArrive: a length header costs the reader what
// actually arrived, not what it declared: 4 bytes from an authenticated peer
// used to make the server allocate up to maxFrame (64 MiB) at once.
func TestReadMsgAllocatesAsBytesArrive(t *testing.T) {
	for _, tc := range []struct {
		name     string
		declared uint32
		sent     int // body bytes before the peer hangs up
	}{
		{"max frame, no body", maxFrame, 0},
		{"max frame, 1 byte", maxFrame, 1},
		{"max frame, 1 MiB", maxFrame, 1 << 20},
		{"16 MiB, 100 KiB", 16 << 20, 100 << 10},
	} {
		frame := binary.BigEndian.AppendUint32(nil, tc.declared)
		frame = append(frame, make([]byte, tc.sent)...)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := readMsg(bytes.NewReader(frame), maxFrame)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "truncated frame") {
			t.Errorf("%s: err = %v, want a truncated-frame ErrMalformed", tc.name, err)
		}
		// Doubling up to what arrived allocates at most ~4x it; the slack
		// covers the first chunk and the runtime's own allocations.
		if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(4*tc.sent+1<<20); got > limit {
			t.Errorf("%s: allocated %d bytes for a frame declaring %d with %d sent, want at most %d",
				tc.name, got, tc.declared, tc.sent, limit)
		}
	}
	// The limit still refuses a header over it at once, saying so.
	_, err := readMsg(bytes.NewReader(binary.BigEndian.AppendUint32(nil, maxFrame+1)), maxFrame)
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "exceeds the limit of 67108864") {
		t.Errorf("over the limit: err = %v", err)
	}
}

// TestReadMsgLargeFrames: frames around and well past the chunk the reader
// starts with arrive whole, however the reader splits them.
func TestReadMsgLargeFrames(t *testing.T) {
	for _, size := range []int{0, 1, 64<<10 - 30, 64 << 10, 64<<10 + 1, 1<<20 + 3, 9 << 20} {
		v := make([]byte, size)
		for i := range v {
			v[i] = byte(i * 7)
		}
		m := msg{op: opSet, keys: []string{"k"}, vals: [][]byte{v}}
		frame := m.encode(nil)
		for name, r := range map[string]io.Reader{
			"whole": bytes.NewReader(frame),
			"half":  iotest.HalfReader(bytes.NewReader(frame)),
			"odd":   bufio.NewReaderSize(iotest.DataErrReader(bytes.NewReader(frame)), 4093),
		} {
			got, err := readMsg(r, maxFrame)
			if err != nil || !reflect.DeepEqual(got, m) {
				t.Fatalf("%d-byte value, %s reader: err %v, equal %v", size, name, err, reflect.DeepEqual(got, m))
			}
		}
	}
}
