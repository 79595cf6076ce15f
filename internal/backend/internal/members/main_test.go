package members

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/pool"
	"github.com/symmem/symmem/rendezvous"
)

// Multi-process tests: the test binary re-executed as a rank of a host
// agreement (roleVar names what it does).
const roleVar = "SYMMEM_MEMBERS_TEST_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleVar); role != "" {
		if err := runRole(role); err != nil {
			fmt.Fprintf(os.Stderr, "role %s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func envInt(k string) int {
	v, _ := strconv.Atoi(os.Getenv(k))
	return v
}

// procEnv is what a child needs to join the parent's agreement.
func procEnv(tok, job string, rank, n int) []string {
	return []string{"SYMMEM_MT_TOKEN=" + tok, "SYMMEM_MT_JOB=" + job, "SYMMEM_MT_RANK=" + strconv.Itoa(rank), "SYMMEM_MT_N=" + strconv.Itoa(n)}
}

// join creates rank's fd exchange and host agreement of n ranks.
func join(ctx context.Context, tok, job string, rank, n int, timeout time.Duration) (*HostAgreement, func(), error) {
	x, err := rendezvous.NewFDExchange(rendezvous.Env{Rank: rank, WorldSize: n, LocalRank: rank, LocalWorldSize: n, Token: tok, JobID: job})
	if err != nil {
		return nil, nil, err
	}
	ranks := make([]int, n)
	for r := range ranks {
		ranks[r] = r
	}
	a, err := NewHostAgreement(ctx, "test", x, "agree-proc", ranks, rank, timeout)
	if err != nil {
		x.Close()
		return nil, nil, err
	}
	return a, func() { a.Close(); x.Close() }, nil
}

func runRole(role string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if role == "presence-exit" { // a rank of another host: announce, then exit without leaving
		store, err := rendezvous.Dial(ctx, os.Getenv("SYMMEM_MT_STORE"), os.Getenv("SYMMEM_MT_TOKEN"))
		if err != nil {
			return err
		}
		if _, err := Announce(ctx, store, envInt("SYMMEM_MT_RANK"), "hostB"); err != nil {
			return err
		}
		os.Exit(0)
	}
	if role == "swap-gave-up" { // creates its fd exchange, gives up (closes it) and lives on
		x, err := rendezvous.NewFDExchange(rendezvous.Env{Rank: envInt("SYMMEM_MT_RANK"), WorldSize: envInt("SYMMEM_MT_N"),
			Token: os.Getenv("SYMMEM_MT_TOKEN"), JobID: os.Getenv("SYMMEM_MT_JOB")})
		if err != nil {
			return err
		}
		x.Close()
		if err := os.WriteFile(os.Getenv("SYMMEM_MT_MARK"), nil, 0o600); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	}
	a, done, err := join(ctx, os.Getenv("SYMMEM_MT_TOKEN"), os.Getenv("SYMMEM_MT_JOB"), envInt("SYMMEM_MT_RANK"), envInt("SYMMEM_MT_N"), 30*time.Second)
	if err != nil {
		return err
	}
	defer done()
	switch role {
	case "agree-exit": // agree once, then exit while the others wait for the second
		return a.Agree(ctx, agree.Record{1, 2, 3})
	case "gate-differ": // 50 calls like rank 0's, then (once rank 0 published it) call 51 with another count
		g := a.Gate()
		for i := 1; i <= 50; i++ {
			if _, err := g.Publish(ctx, entry(i, i%10 == 0)); err != nil {
				return err
			}
		}
		for atomic.LoadUint64(g.word(0, wPub)) < 51 {
			time.Sleep(time.Millisecond)
		}
		_, err := g.Publish(ctx, entry(52, true))
		fmt.Println(err)
		return nil
	case "agree-loop", "scope-loop": // SYMMEM_MT_LOOPS timed agreements or scope ends; prints ns per call
		one, err := loop(role, a)
		if err != nil {
			return err
		}
		ns, err := timeLoop(one, envInt("SYMMEM_MT_LOOPS"))
		if err != nil {
			return err
		}
		fmt.Println(ns)
		return nil
	}
	return fmt.Errorf("unknown role %q", role)
}

// child is a rank running in its own process.
type child struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

// startChild starts rank of n running role in its own process.
func startChild(t testing.TB, role, tok, job string, rank, n int, extra ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	c.cmd.Env = append(append(os.Environ(), roleVar+"="+role), append(procEnv(tok, job, rank, n), extra...)...)
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
	return c
}

// agreeGroup is a pool.Group of this host's ranks that compares in-band
// through a HostAgreement (as the GPU backend's groups on one host do);
// it registers nothing (a fake provider's segments).
type agreeGroup struct{ *HostAgreement }

func (g agreeGroup) Rank() int            { return g.me }
func (g agreeGroup) Size() int            { return len(g.ranks) }
func (g agreeGroup) Name() string         { return "world" }
func (g agreeGroup) Agreer() agree.Agreer { return g.HostAgreement }
func (g agreeGroup) AllGather(context.Context, []byte) ([][]byte, error) {
	return nil, errors.New("agreeGroup: no store")
}
func (g agreeGroup) Register(context.Context, pool.Segment) error   { return nil }
func (g agreeGroup) Deregister(context.Context, pool.Segment) error { return nil }

type fakeProvider struct{}

func (fakeProvider) Granularity() int64 { return 64 << 10 }
func (fakeProvider) CreateSegment(id pool.SegmentID, size int64) (uint64, error) {
	return uint64(id) << 40, nil
}
func (fakeProvider) ReleaseSegment(pool.SegmentID) error { return nil }

// loop returns one call of what a benchmark times: an agreement, or
// OpenScope + Scope.End of a pool group over a that creates no segment.
func loop(what string, a *HostAgreement) (func() error, error) {
	ctx, rec := context.Background(), agree.Record{1, 2, 3}
	if what == "agree-loop" {
		return func() error { return a.Agree(ctx, rec) }, nil
	}
	p, err := pool.New(fakeProvider{}, pool.Options{})
	if err != nil {
		return nil, err
	}
	id, err := p.AddGroup(agreeGroup{a}, 0)
	if err != nil {
		return nil, err
	}
	return func() error {
		s, err := p.OpenScope(id)
		if err != nil {
			return err
		}
		return s.End(ctx)
	}, nil
}

// timeLoop runs one 1000 times, then n times timed: ns per call.
func timeLoop(one func() error, n int) (float64, error) {
	for range 1000 {
		if err := one(); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	for range n {
		if err := one(); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n), nil
}

// BenchmarkHostAgreementProcs: 2 ranks in 2 processes (as on a GPU host),
// back to back: agreements, and pool scope ends that create no segment
// compared through the agreement (agree.Agreer, what Scope.End costs on the
// GPU backend less the user API's wrapper). ns/call is the slower rank's.
func BenchmarkHostAgreementProcs(b *testing.B) {
	for _, what := range []string{"agree-loop", "scope-loop"} {
		b.Run(strings.TrimSuffix(what, "-loop"), func(b *testing.B) {
			tok, job := rendezvous.NewToken(), rendezvous.NewJobID()
			kid := startChild(b, what, tok, job, 1, 2, "SYMMEM_MT_LOOPS="+strconv.Itoa(b.N))
			a, done, err := join(context.Background(), tok, job, 0, 2, 30*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer done()
			one, err := loop(what, a)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			mine, err := timeLoop(one, b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := kid.cmd.Wait(); err != nil {
				b.Fatalf("rank 1: %v: %s", err, kid.out.String())
			}
			theirs, err := strconv.ParseFloat(strings.TrimSpace(kid.out.String()), 64)
			if err != nil {
				b.Fatalf("rank 1 printed %q", kid.out.String())
			}
			b.ReportMetric(max(mine, theirs), "ns/call")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// TestHostAgreementPeerExits: a peer process that exits while the others
// wait for it in Agree is reported within about a second, naming it
// (errs.PeerExited), not at the 30 s timeout; every waiting rank sees it.
func TestHostAgreementPeerExits(t *testing.T) {
	const n = 3 // ranks 0 and 2 here, rank 1 agrees once and exits
	tok, job := rendezvous.NewToken(), rendezvous.NewJobID()
	kid := startChild(t, "agree-exit", tok, job, 1, n)
	ctx := context.Background()
	as := make([]*HostAgreement, n)
	res := make([]error, n)
	var wg sync.WaitGroup
	for _, r := range []int{0, 2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var done func()
			if as[r], done, res[r] = join(ctx, tok, job, r, n, 30*time.Second); res[r] == nil {
				t.Cleanup(done)
			}
		}()
	}
	wg.Wait()
	for _, r := range []int{0, 2} {
		if res[r] != nil {
			t.Fatalf("rank %d: %v", r, res[r])
		}
	}
	rec := agree.Record{1, 2, 3}
	for _, pass := range []string{"first", "second"} {
		start := time.Now()
		for _, r := range []int{0, 2} {
			wg.Add(1)
			go func() { defer wg.Done(); res[r] = as[r].Agree(ctx, rec) }()
		}
		wg.Wait()
		el := time.Since(start)
		for _, r := range []int{0, 2} {
			err := res[r]
			if pass == "first" {
				if err != nil {
					t.Fatalf("first agreement, rank %d: %v", r, err)
				}
				continue
			}
			t.Logf("rank %d after %v: %v", r, el, err)
			if !errors.Is(err, errs.PeerExited) || !strings.Contains(err.Error(), "rank 1 exited") {
				t.Errorf("rank %d: %v, want rank 1 named as exited", r, err)
			}
		}
		if pass == "first" {
			if err := kid.cmd.Wait(); err != nil {
				t.Fatalf("rank 1: %v: %s", err, kid.out.String())
			}
		} else if el > 2*time.Second {
			t.Errorf("the exit was reported after %v (timeout 30s), want about a second at most", el)
		}
	}
}

// TestCallGateProcs: two processes; rank 0 publishes a gated call and
// sleeps as a watcher does; rank 1 makes the same call with another count:
// it finds the difference when it publishes, and rank 0's Sleep (a futex
// on the shared page) returns within milliseconds, not at its 10 s bound.
func TestCallGateProcs(t *testing.T) {
	tok, job := rendezvous.NewToken(), rendezvous.NewJobID()
	kid := startChild(t, "gate-differ", tok, job, 1, 2)
	a, done, err := join(context.Background(), tok, job, 0, 2, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	g := a.Gate()
	for i := 1; i <= 51; i++ {
		if _, err := g.Publish(context.Background(), entry(i, i%10 == 0 || i == 51)); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	start := time.Now()
	for g.Failed() == nil && time.Since(start) < 20*time.Second {
		g.Sleep(10 * time.Second)
	}
	el := time.Since(start)
	m := g.Failed()
	if err := kid.cmd.Wait(); err != nil {
		t.Fatalf("rank 1: %v: %s", err, kid.out.String())
	}
	t.Logf("rank 0 woken after %v; rank 1's Publish: %s", el, strings.TrimSpace(kid.out.String()))
	if m == nil || m.Call != 51 || m.Rank != 1 || m.Theirs.Record[2] != 52 || m.Rank0.Record[2] != 51 {
		t.Fatalf("rank 0 sees %v, want call 51: rank 1's count 52 against 51", m)
	}
	if !strings.Contains(kid.out.String(), "call 51") {
		t.Errorf("rank 1's Publish did not report the difference: %s", kid.out.String())
	}
	if el > 5*time.Second {
		t.Errorf("rank 0's watcher woke after %v", el)
	}
	if g.Approved() != 50 {
		t.Errorf("approved %d, want 50 (every call before the difference)", g.Approved())
	}
}
