package cuda

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/native/cudadrv"
)

// captureOnly is an executor that answers capturing only (follow asks
// nothing else).
type captureOnly struct {
	executor
	captured map[uint64]bool
	err      error
	asked    int
}

func (x *captureOnly) capturing(_ *cudadrv.Context, s uint64) (bool, error) {
	x.asked++
	return x.captured[s], x.err
}

// TestFollow: a group's call on another stream than its previous call's
// waits for that call (the backend's stream marked now, a caller's stream
// by its fence), and nothing is queued or asked where the stream stays.
func TestFollow(t *testing.T) {
	// Fake handles sit at 4096 and above: the driver's handles are pointers,
	// and the Go runtime refuses smaller ones found on a goroutine's stack.
	const own, a, b, capt = 0x5000, 0x6000, 0x7000, 0x8000
	type step struct {
		s       uint64
		issued  bool   // the call was queued (followed); false: refused after follow
		quiesce bool   // the fences were dropped before this call
		want    string // what the call waits for (and records first), "" nothing
		asked   int    // capture queries made so far
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"same stream asks once", []step{{s: a, issued: true, asked: 1}, {s: a, issued: true, asked: 1}, {s: a, issued: true, asked: 1}}},
		{"own then caller", []step{{s: own, issued: true}, {s: a, issued: true, want: "record 0x5000 0x30400; wait 0x6000 0x30400"}}},
		{"caller then own", []step{{s: a, issued: true}, {s: own, issued: true, want: "wait 0x5000 0x3a000"}}},
		{"caller to caller and back", []step{{s: a, issued: true}, {s: b, issued: true, want: "wait 0x7000 0x3a000"},
			{s: a, issued: true, want: "wait 0x6000 0x3b000"}}},
		{"captured calls neither wait nor count", []step{{s: a, issued: true}, {s: capt, issued: true},
			{s: b, issued: true, want: "wait 0x7000 0x3a000"}}},
		{"a refused call does not count", []step{{s: a, issued: true}, {s: b, want: "wait 0x7000 0x3a000"},
			{s: own, issued: true, want: "wait 0x5000 0x3a000"}}},
		{"after quiesce nothing to wait for", []step{{s: a, issued: true}, {s: b, issued: true, quiesce: true}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := &captureOnly{captured: map[uint64]bool{capt: true}}
			st := &streams{h: handles{order: 0x30400}}
			fences := []streamFence{{stream: a, ev: cudadrv.WrapEvent(nil, 0x3a000)}, {stream: b, ev: cudadrv.WrapEvent(nil, 0x3b000)}}
			ownS := cudadrv.WrapStream(nil, own)
			for i, s := range c.steps {
				st.fences = fences
				if s.quiesce {
					st.fences = nil
				}
				mark, record, err := st.follow(s.s, ownS, x, nil)
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				var got string
				switch {
				case record:
					got = fmt.Sprintf("record %#x %#x; wait %#x %#x", uint64(own), mark, s.s, mark)
				case mark != 0:
					got = fmt.Sprintf("wait %#x %#x", s.s, mark)
				}
				if got != s.want {
					t.Errorf("step %d on %#x: %q, want %q", i, s.s, got, s.want)
				}
				if s.asked > 0 && x.asked != s.asked {
					t.Errorf("step %d: %d capture queries, want %d", i, x.asked, s.asked)
				}
				if s.issued {
					st.followed()
				}
			}
		})
	}
	t.Run("a capture query that fails refuses the call", func(t *testing.T) {
		x := &captureOnly{err: errors.New("invalid handle")}
		st := &streams{}
		_, _, err := st.follow(0x9900, cudadrv.WrapStream(nil, own), x, nil)
		if err == nil || !strings.Contains(err.Error(), "stream 0x9900: asking whether it is being captured: invalid handle") {
			t.Fatalf("got %v, want the stream's capture query error", err)
		}
	})
}
