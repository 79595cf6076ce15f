package rendezvous

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
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
