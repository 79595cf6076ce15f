package members

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/rendezvous"
)

// callLogs starts n ranks' logs on one real store (each rank its own
// client), with tick, and returns them and each rank's onDiff channel.
func callLogs(t *testing.T, n int, tick time.Duration) ([]*CallLog, []chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tok := rendezvous.NewToken()
	srv, err := rendezvous.NewServer("127.0.0.1:0", tok)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ranks := make([]int, n)
	for r := range ranks {
		ranks[r] = 10 + r // global ranks differ from group ranks
	}
	logs := make([]*CallLog, n)
	diffs := make([]chan error, n)
	for r := range n {
		store, err := rendezvous.Dial(ctx, srv.Addr(), tok)
		if err != nil {
			t.Fatal(err)
		}
		diffs[r] = make(chan error, 1)
		d := diffs[r]
		logs[r] = NewCallLog(`test: group "dp"`, store, "calllog-test", ranks, r, tick, func(err error) { d <- err })
		t.Cleanup(func() { logs[r].Close(); store.Close() })
	}
	return logs, diffs
}

// call is the k-th call of a test sequence (an all-reduce of k+1 elements
// on nccl).
func call(k int) (rec [6]uint64, path uint8) {
	return agree.CallRecord(coll.AllReduce, coll.BFloat16, coll.Sum, 0, int64(k+1), 0, 0, 0), agree.PathCode(coll.AlgoNCCL)
}

// TestCallLogAgrees: ranks that make the same calls, at different paces
// (one far ahead, one behind by more than a post holds), never report a
// difference.
func TestCallLogAgrees(t *testing.T) {
	logs, diffs := callLogs(t, 3, 5*time.Millisecond)
	for k := range 600 {
		for r, l := range logs {
			if r == 2 && k >= 300 {
				continue // behind: catches up below
			}
			rec, p := call(k)
			l.Add(rec, p)
		}
		if k%50 == 0 {
			time.Sleep(6 * time.Millisecond)
		}
	}
	time.Sleep(30 * time.Millisecond)
	for k := 300; k < 600; k++ {
		rec, p := call(k)
		logs[2].Add(rec, p)
	}
	time.Sleep(50 * time.Millisecond)
	for r, d := range diffs {
		select {
		case err := <-d:
			t.Fatalf("rank %d: %v", r, err)
		default:
		}
	}
}

// TestCallLogDifference: a rank whose call differs is reported on every
// rank within a few ticks, naming the call, the argument, both values and
// both global ranks (errs.Mismatch); a difference older than the posted
// calls is still found, dated.
func TestCallLogDifference(t *testing.T) {
	for _, c := range []struct {
		name    string
		at      int    // the call that differs on rank 1
		after   int    // equal calls after it before the first tick
		want    string // in every rank's error
		wantAny string
	}{
		{"named", 40, 0, "call 41 of the group", "count="},
		{"dated", 5, 100, "at or before call", "made different calls"},
	} {
		t.Run(c.name, func(t *testing.T) {
			logs, diffs := callLogs(t, 3, 20*time.Millisecond)
			for k := range c.at + 1 + c.after {
				for r, l := range logs {
					rec, p := call(k)
					if r == 1 && k == c.at {
						rec[2]++ // another count
					}
					l.Add(rec, p)
				}
			}
			for r, d := range diffs {
				select {
				case err := <-d:
					if !errors.Is(err, errs.Mismatch) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.wantAny) ||
						!strings.Contains(err.Error(), "rank 11") {
						t.Errorf("rank %d: %v, want ErrMismatch with %q, %q and rank 11", r, err, c.want, c.wantAny)
					}
					t.Logf("rank %d: %v", r, err)
				case <-time.After(2 * time.Second):
					t.Fatalf("rank %d: no difference reported within 2 s", r)
				}
			}
		})
	}
}

// TestCallLogFarBehind: a peer between logHistory-logPost and logHistory
// calls behind is compared, and the call named is the one that differs:
// its oldest posted calls are no longer in this rank's ring (a later call
// took their place) and are skipped, not compared with that later call
// (which named call 970 with call 1994's count; found by review).
func TestCallLogFarBehind(t *testing.T) {
	l := &CallLog{what: "t", ranks: []int{10, 11}, me: 0}
	b := &CallLog{what: "t", ranks: []int{10, 11}, me: 1}
	const mine, theirs, differ = 2000, 985, 980 // 1015 calls behind; the difference at call 980 (1-based)
	for k := range mine {
		rec, p := call(k)
		l.Add(rec, p)
		if k < theirs {
			if k+1 == differ {
				rec[2] += 1000000 // another count
			}
			b.Add(rec, p)
		}
	}
	_, post := b.post()
	if binary.LittleEndian.Uint64(post) != theirs {
		t.Fatal("bad post")
	}
	what := l.compare(1, post)
	t.Log(what)
	if !strings.Contains(what, "call 980 of the group") {
		t.Errorf("the calls differ at call %d, compare says: %s", differ, what)
	}
}
