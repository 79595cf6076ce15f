package bench

import (
	"errors"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
)

// smallRank is a fake rank whose memory holds at most limit bytes.
type smallRank struct {
	*fakeRank
	limit int64
}

var errTooBig = errors.New("too big")

func (s smallRank) CheckFits(n int64) error {
	if n > s.limit {
		return errTooBig
	}
	return nil
}

// TestRunChecksMemoryUpFront: a sweep whose largest size does not fit fails
// before it allocates or measures anything, naming the buffer size; with
// ordinary memory (--plain) too, whose buffers the rank allocates as well
// (`symmem bench --plain -b 100G` died in Go's allocator: "fatal error:
// runtime: out of memory", a stack trace per rank, exit status 2).
func TestRunChecksMemoryUpFront(t *testing.T) {
	for _, plain := range []bool{false, true} {
		j := newFakeJob(1)
		cfg := baseConfig()
		cfg.Ops, cfg.Plain = []coll.Kind{coll.AllGather}, plain
		cfg.Sizes = []int64{1 << 10, 1 << 20}
		_, err := Run(smallRank{j.ranks[0], 1 << 20}, cfg)
		if !errors.Is(err, errTooBig) || !strings.Contains(err.Error(), FormatSize(1<<20)) {
			t.Fatalf("plain %v: got %v, want the up-front memory error naming %s", plain, err, FormatSize(1<<20))
		}
		if len(j.ranks[0].allocs) != 0 {
			t.Fatalf("plain %v: allocated %d buffers before failing", plain, len(j.ranks[0].allocs))
		}
		if _, err := Run(smallRank{j.ranks[0], 4 << 20}, cfg); err != nil {
			t.Fatalf("plain %v: %v", plain, err)
		}
	}
}
