package symmem

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/rendezvous"
)

// Ranks given distinct host identities (SYMMEM_HOST, as `symmem launch
// --hosts` sets it) act as separate hosts on one machine: the multi-host
// test facility. The CPU backend is single-host, so it must refuse such a
// world at Init on every rank, at once and saying why, never hang.

func init() { roles["hosts"] = roleHosts }

// TestCPUBackendRefusesHosts: 4 ranks as 2 hosts of 2 (ranks 0-1 "a",
// 2-3 "b"): every rank's Init fails within 5 s (the timeout is 20 s) with
// ErrNotSupported, naming the CPU backend as single-host and both hosts.
// With one name for all 4, Init works and an all-reduce sums across them:
// the name, not the machine, decides who shares memory.
func TestCPUBackendRefusesHosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		hosts  string
		refuse bool
	}{
		{"a,a,b,b", true},
		{"a,a,a,a", false},
	} {
		t.Run(tc.hosts, func(t *testing.T) {
			res := spawn(t, 4, "hosts", "SYMMEM_TEST_HOST_NAMES="+tc.hosts, "SYMMEM_TEST_REFUSE="+strconv.FormatBool(tc.refuse))
			expectOK(t, res)
		})
	}
}

func roleHosts(ctx context.Context) error {
	rank, _ := strconv.Atoi(os.Getenv("RANK"))
	hosts := strings.Split(os.Getenv("SYMMEM_TEST_HOST_NAMES"), ",")
	os.Setenv(rendezvous.VarHost, hosts[rank])
	refuse := os.Getenv("SYMMEM_TEST_REFUSE") == "true"
	o := testOptions()
	o.Backend = "cpu"
	t0 := time.Now()
	w, err := Init(ctx, o)
	el := time.Since(t0)
	if refuse {
		switch {
		case err == nil:
			w.Close()
			return errors.New("Init succeeded with ranks on hosts a and b: the CPU backend must refuse")
		case el > 5*time.Second:
			return fmt.Errorf("Init failed after %v, want within 5 s: %v", el, err)
		case !errors.Is(err, ErrNotSupported):
			return fmt.Errorf("Init's error does not wrap ErrNotSupported: %v", err)
		case !strings.Contains(err.Error(), "single-host") || !strings.Contains(err.Error(), `"host:a"`) || !strings.Contains(err.Error(), `"host:b"`):
			return fmt.Errorf("Init's error does not say the CPU backend is single-host and name both hosts: %v", err)
		}
		fmt.Printf("refused after %v: %v\n", el.Round(time.Millisecond), err)
		return nil
	}
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	b, err := allocBufs(ctx, g, 4)
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(b.in.Bytes(), uint32(rank+1))
	if _, err := g.AllReduce(ctx, coll.Span{Ptr: b.out.Ptr, Len: 4}, coll.Span{Ptr: b.in.Ptr, Len: 4}, coll.Int32, coll.Sum); err != nil {
		return err
	}
	if err := w.Synchronize(ctx); err != nil {
		return err
	}
	if got := binary.LittleEndian.Uint32(b.out.Bytes()); got != 10 {
		return fmt.Errorf("all-reduce of 1..4 on host a gave %d, want 10", got)
	}
	return nil
}
