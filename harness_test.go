package symmem

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/symmem/symmem/launch"
	"github.com/symmem/symmem/rendezvous"
)

// Multi-rank tests re-execute the test binary: the parent hosts the store,
// starts one child per rank with the torchrun-style environment and
// SYMMEM_TEST_ROLE naming the function to run, and checks exit codes.

const roleVar = "SYMMEM_TEST_ROLE"

// roles maps a role name to the child body; a returned error fails the rank.
var roles = map[string]func(ctx context.Context) error{}

// roleLimits bounds a role's run where the default, 55 s, is too short: the
// child's context ends 5 s before the harness kills it.
var roleLimits = map[string]time.Duration{}

func roleLimit(role string) time.Duration {
	if d, ok := roleLimits[role]; ok {
		return d
	}
	return 55 * time.Second
}

func TestMain(m *testing.M) {
	if role := os.Getenv(roleVar); role != "" {
		f, ok := roles[role]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown test role %q\n", role)
			os.Exit(2)
		}
		ctx, cancel := context.WithTimeout(context.Background(), roleLimit(role)-5*time.Second)
		err := f(ctx)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "rank %s: FAIL: %v\n", os.Getenv("RANK"), err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// rankResult is one child's outcome.
type rankResult struct {
	code int
	out  string
	took time.Duration // from the spawn to the process's end
}

// spawn runs role on n ranks and returns every rank's result. extra is added
// to every child's environment.
func spawn(t testing.TB, n int, role string, extra ...string) []rankResult {
	t.Helper()
	token := rendezvous.NewToken()
	srv, err := rendezvous.NewServer("127.0.0.1:0", token)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	_, port, _ := strings.Cut(srv.Addr(), ":")
	job := rendezvous.NewJobID()
	// SYMMEM_TEST_HOSTS=H runs the ranks as H hosts of this machine, as
	// `symmem launch --hosts H` does (docs/multihost.md).
	hosts := envInt("SYMMEM_TEST_HOSTS", 0)
	if hosts > 1 && n%hosts != 0 {
		t.Fatalf("SYMMEM_TEST_HOSTS=%d does not divide the %d ranks of this test", hosts, n)
	}
	devices := launch.VisibleDevices(n, os.Environ())
	res := make([]rankResult, n)
	start := time.Now()
	var wg sync.WaitGroup
	for r := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), roleVar+"="+role,
			"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n),
			"LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(n),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+port, "SYMMEM_TOKEN="+token,
			"SYMMEM_JOB_ID="+job, "SYMMEM_STORE_HOSTED=1")
		if hosts > 1 {
			cmd.Env = append(cmd.Env, launch.RankEnv(n, hosts, r, devices)...)
		}
		cmd.Env = append(cmd.Env, extra...)
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(roleLimit(role)):
				// SIGQUIT first: the Go runtime prints every goroutine's
				// stack (where the rank hangs) before it exits.
				cmd.Process.Signal(syscall.SIGQUIT)
				select {
				case <-done:
				case <-time.After(3 * time.Second):
					cmd.Process.Kill()
					<-done
				}
				fmt.Fprintf(&buf, "\n(killed by the harness after %v: SIGQUIT, its stacks above)", roleLimit(role))
			}
			res[r] = rankResult{code: cmd.ProcessState.ExitCode(), out: buf.String(), took: time.Since(start)}
		}()
	}
	wg.Wait()
	if testing.Verbose() {
		for r, x := range res {
			t.Logf("rank %d exit %d after %v: %s", r, x.code, x.took.Round(time.Millisecond), strings.TrimSpace(x.out))
		}
	}
	return res
}

// expectOK fails the test unless every rank exited 0.
func expectOK(t *testing.T, res []rankResult) {
	t.Helper()
	for r, x := range res {
		if x.code != 0 {
			t.Errorf("rank %d exited %d:\n%s", r, x.code, x.out)
		}
	}
}

// shmFiles lists /dev/shm (to prove nothing is left behind).
func shmFiles(t *testing.T) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir("/dev/shm")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	m := map[string]bool{}
	for _, e := range ents {
		m[e.Name()] = true
	}
	return m
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
