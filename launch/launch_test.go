package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/symmem/symmem/rendezvous"
)

const roleVar = "SYMMEM_LAUNCH_TEST_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleVar); role != "" {
		os.Exit(runRole(role))
	}
	os.Exit(m.Run())
}

// runRole is what each rank does when the test binary is re-executed.
func runRole(role string) int {
	e, err := rendezvous.EnvFromOS()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 10
	}
	switch role {
	case "hostenv": // what a rank of a simulated host sees
		fmt.Printf("host rank=%d local=%d/%d host=%s nccl=%s group=%s gpus=%s\n", e.Rank, e.LocalRank, e.LocalWorldSize,
			e.Host, os.Getenv("NCCL_HOSTID"), os.Getenv("GROUP_RANK"), os.Getenv("CUDA_VISIBLE_DEVICES"))
		return 0
	case "env":
		// MASTER_PORT must be free for torch: every rank can bind it (one
		// after another; torch's rank 0 would keep it).
		masterFree := false
		for range 50 {
			if ln, err := net.Listen("tcp", e.StoreAddr()); err == nil {
				ln.Close()
				masterFree = true
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		fmt.Printf("env rank=%d world=%d local=%d/%d addr=%s own_store=%t master_free=%t token=%t job=%s\n",
			e.Rank, e.WorldSize, e.LocalRank, e.LocalWorldSize, e.MasterAddr,
			e.Store != "" && e.Store != e.StoreAddr(), masterFree, len(e.Token) == 32, e.JobID)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, cleanup, err := rendezvous.Bootstrap(ctx, e)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 11
		}
		if err := c.Barrier(ctx, "env", e.WorldSize); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 12
		}
		cleanup()
		// Many small writes with no newline between them must still reach the
		// output as whole lines.
		for i := range 50 {
			fmt.Printf("%d-", i)
		}
		fmt.Println("end")
		fmt.Fprintf(os.Stderr, "to stderr from %d\n", e.Rank)
		fmt.Print("no newline at exit")
		return 0
	case "fail":
		signal.Ignore(syscall.SIGINT)
		sigs := make(chan os.Signal, 1)
		if os.Getenv("IGNORE_TERM") == "1" {
			signal.Ignore(syscall.SIGTERM)
		} else {
			signal.Notify(sigs, syscall.SIGTERM)
		}
		fmt.Println("ready")
		if e.Rank == 1 {
			time.Sleep(200 * time.Millisecond)
			fmt.Println("failing")
			return 3
		}
		select {
		case <-sigs:
			fmt.Println("got SIGTERM")
			return 143
		case <-time.After(30 * time.Second):
			return 0
		}
	case "spew": // once the consumer holds "stall", a burst of output the pipe holds whole
		fmt.Println("stall")
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(os.Getenv("GOFILE")); err == nil {
				break
			} else if time.Now().After(deadline) {
				return 14
			}
		}
		line := strings.Repeat("x", spewLen-1) + "\n"
		for range spewLines {
			os.Stdout.WriteString(line)
		}
		writePid(os.Getpid())
		return 0
	case "escape": // leave a silent child holding the output, outside the rank's process group
		cmd := exec.Command("sleep", "120")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 13
		}
		writePid(cmd.Process.Pid)
		fmt.Println("started")
		return 0
	case "wait-signal":
		sigs := make(chan os.Signal, 2)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		fmt.Println("ready")
		select {
		case s := <-sigs:
			fmt.Println("got", s)
			return 42
		case <-time.After(30 * time.Second):
			return 0
		}
	}
	return 99
}

// syncBuf is a goroutine-safe output sink.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// gatedWriter holds every write until gate is closed, closing entered when
// the first one comes: a consumer that stalls (a pipe into a busy logger, a
// paused terminal).
type gatedWriter struct {
	gate, entered chan struct{}
	once          sync.Once
	syncBuf
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.gate
	return w.syncBuf.Write(p)
}

func cfgFor(role string, n int, out, errOut *syncBuf, env ...string) Config {
	return Config{N: n, Prog: os.Args[0], Args: []string{"-test.run=^$"},
		Stdout: out, Stderr: errOut, Env: append([]string{roleVar + "=" + role}, env...)}
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestEnvAndPrefixedOutput(t *testing.T) {
	var out, errOut syncBuf
	code, err := Run(tctx(t), cfgFor("env", 3, &out, &errOut))
	if code != 0 || err != nil {
		t.Fatalf("code %d err %v\nstdout:\n%s\nstderr:\n%s", code, err, &out, &errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	re := regexp.MustCompile(`^\[rank (\d)\] (.*)$`)
	seen := map[string]bool{}
	for _, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line without rank prefix: %q\n%s", l, &out)
		}
		seen[m[1]+":"+strings.SplitN(m[2], " ", 2)[0]] = true
	}
	for r := range 3 {
		want := fmt.Sprintf(`[rank %d] env rank=%d world=3 local=%d/3 addr=127.0.0.1 own_store=true master_free=true token=true job=`, r, r, r)
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q", want)
		}
		long := fmt.Sprintf("[rank %d] 0-1-2-3-", r)
		if !strings.Contains(out.String(), long) || !strings.Contains(out.String(), "48-49-end\n") {
			t.Errorf("rank %d: partial writes not joined into one line", r)
		}
		if !strings.Contains(out.String(), fmt.Sprintf("[rank %d] no newline at exit\n", r)) {
			t.Errorf("rank %d: final partial line lost", r)
		}
		if !strings.Contains(errOut.String(), fmt.Sprintf("[rank %d] to stderr from %d\n", r, r)) {
			t.Errorf("rank %d: stderr line missing: %s", r, &errOut)
		}
	}
	if len(lines) != 9 {
		t.Errorf("want 9 stdout lines, got %d:\n%s", len(lines), &out)
	}
}

func TestFailingRankStopsOthers(t *testing.T) {
	for _, ignoreTerm := range []bool{false, true} {
		t.Run(fmt.Sprint("ignoreTERM=", ignoreTerm), func(t *testing.T) {
			var out, errOut syncBuf
			cfg := cfgFor("fail", 3, &out, &errOut)
			cfg.Grace = 500 * time.Millisecond
			if ignoreTerm {
				cfg.Env = append(cfg.Env, "IGNORE_TERM=1")
			}
			start := time.Now()
			code, err := Run(tctx(t), cfg)
			el := time.Since(start)
			if code != 3 || err == nil || !strings.Contains(err.Error(), "rank 1 exited with status 3; stopped the other ranks") {
				t.Fatalf("code %d err %v\n%s%s", code, err, &out, &errOut)
			}
			if el > 10*time.Second {
				t.Fatalf("took %v: the other ranks were not stopped", el)
			}
			for _, r := range []int{0, 2} {
				got := strings.Contains(out.String(), fmt.Sprintf("[rank %d] got SIGTERM", r))
				if got == ignoreTerm {
					t.Errorf("rank %d: SIGTERM seen=%v with ignoreTERM=%v\n%s", r, got, ignoreTerm, &out)
				}
			}
		})
	}
}

func TestSignalForwarding(t *testing.T) {
	var out, errOut syncBuf
	sigs := make(chan os.Signal, 1)
	cfg := cfgFor("wait-signal", 3, &out, &errOut)
	cfg.Signals = sigs
	done := make(chan struct{})
	var code int
	var err error
	go func() { code, err = Run(tctx(t), cfg); close(done) }()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(out.String(), "ready") < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("ranks never got ready:\n%s%s", &out, &errOut)
		}
		time.Sleep(10 * time.Millisecond)
	}
	sigs <- syscall.SIGINT
	<-done
	if code != 42 || err == nil {
		t.Fatalf("code %d err %v", code, err)
	}
	for r := range 3 {
		if !strings.Contains(out.String(), fmt.Sprintf("[rank %d] got interrupt", r)) {
			t.Errorf("rank %d did not get SIGINT:\n%s", r, &out)
		}
	}
}

func TestTimeout(t *testing.T) {
	var out, errOut syncBuf
	cfg := cfgFor("wait-signal", 2, &out, &errOut)
	cfg.Timeout = 500 * time.Millisecond
	code, err := Run(tctx(t), cfg)
	if code != ExitTimeout || err == nil || !strings.Contains(err.Error(), "exceeded its timeout") {
		t.Fatalf("code %d err %v", code, err)
	}
}

func TestBadConfig(t *testing.T) {
	cases := map[string]Config{
		"zero ranks":  {N: 0, Prog: "true"},
		"too many":    {N: MaxRanks + 1, Prog: "true"},
		"no program":  {N: 1},
		"not a file":  {N: 1, Prog: "/nonexistent/symmem-prog"},
		"not in PATH": {N: 1, Prog: "symmem-no-such-program"},
		"hosts < 0":   {N: 2, Prog: "true", Hosts: -1},
		"hosts > N":   {N: 2, Prog: "true", Hosts: 3},
		"uneven":      {N: 4, Prog: "true", Hosts: 3},
	}
	for name, cfg := range cases {
		code, err := Run(context.Background(), cfg)
		if code == 0 || !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: code %d err %v", name, code, err)
		}
	}
}

// TestHosts: --hosts splits the ranks into hosts of consecutive ranks,
// each with its own name (SYMMEM_HOST, NCCL_HOSTID), local ranks, node
// rank and block of GPUs, as the ranks see them.
func TestHosts(t *testing.T) {
	var out, errOut syncBuf
	cfg := cfgFor("hostenv", 4, &out, &errOut, "CUDA_VISIBLE_DEVICES=4,5,6,7")
	cfg.Hosts = 2
	code, err := Run(tctx(t), cfg)
	if code != 0 || err != nil {
		t.Fatalf("code %d err %v\nstdout:\n%s\nstderr:\n%s", code, err, &out, &errOut)
	}
	for _, want := range []string{
		"[rank 0] host rank=0 local=0/2 host=host0 nccl=host0 group=0 gpus=4,5\n",
		"[rank 1] host rank=1 local=1/2 host=host0 nccl=host0 group=0 gpus=4,5\n",
		"[rank 2] host rank=2 local=0/2 host=host1 nccl=host1 group=1 gpus=6,7\n",
		"[rank 3] host rank=3 local=1/2 host=host1 nccl=host1 group=1 gpus=6,7\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in\n%s", want, &out)
		}
	}
}

func TestRankEnv(t *testing.T) {
	for _, tc := range []struct {
		n, hosts, r int
		devices     []string
		want        string
	}{
		{2, 0, 1, nil, "RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2"},
		{2, 1, 0, nil, "RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2"},
		{4, 2, 3, []string{"0", "1", "2", "3"}, "RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 GROUP_RANK=1 SYMMEM_HOST=host1 NCCL_HOSTID=host1 CUDA_VISIBLE_DEVICES=2,3"},
		{6, 3, 2, []string{"a", "b", "c", "d", "e", "f", "g"}, "RANK=2 WORLD_SIZE=6 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 GROUP_RANK=1 SYMMEM_HOST=host1 NCCL_HOSTID=host1 CUDA_VISIBLE_DEVICES=c,d"},
		// As many GPUs as one host's ranks: every host gets them all.
		{4, 2, 2, []string{"0", "1"}, "RANK=2 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 GROUP_RANK=1 SYMMEM_HOST=host1 NCCL_HOSTID=host1 CUDA_VISIBLE_DEVICES=0,1"},
		{4, 2, 1, []string{"0", "1", "2"}, "RANK=1 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 SYMMEM_HOST=host0 NCCL_HOSTID=host0 CUDA_VISIBLE_DEVICES=0,1"},
		// Fewer GPUs than a host's ranks (they share them): the list is left alone.
		{4, 2, 2, []string{"0"}, "RANK=2 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 GROUP_RANK=1 SYMMEM_HOST=host1 NCCL_HOSTID=host1"},
	} {
		if got := strings.Join(RankEnv(tc.n, tc.hosts, tc.r, tc.devices), " "); got != tc.want {
			t.Errorf("RankEnv(%d, %d, %d, %v) = %s, want %s", tc.n, tc.hosts, tc.r, tc.devices, got, tc.want)
		}
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{nil, "0,1,2"},
		{[]string{"CUDA_VISIBLE_DEVICES=3,1"}, "3,1"},
		{[]string{"CUDA_VISIBLE_DEVICES=3", "CUDA_VISIBLE_DEVICES=0,1,2,3"}, "0,1,2,3"},
		{[]string{"CUDA_VISIBLE_DEVICES="}, ""},
	} {
		if got := strings.Join(VisibleDevices(3, tc.env), ","); got != tc.want {
			t.Errorf("VisibleDevices(3, %v) = %s, want %s", tc.env, got, tc.want)
		}
	}
}

// 48 lines of 1000 bytes: less than a pipe holds, so the rank exits while
// they wait in it.
const spewLines, spewLen = 48, 1000

// TestOutputOutlivesStalledConsumer: a rank's last output reaches Stdout
// however long after its exit the consumer takes it (the launcher used to
// close the pipes a second after the exit, dropping what they still held:
// up to ~128 KiB with its line buffer).
func TestOutputOutlivesStalledConsumer(t *testing.T) {
	var errOut syncBuf
	out := &gatedWriter{gate: make(chan struct{}), entered: make(chan struct{})}
	dir := t.TempDir()
	cfg := cfgFor("spew", 1, nil, &errOut, "PIDFILE="+dir+"/pid", "GOFILE="+dir+"/go")
	cfg.Stdout, cfg.NoPrefix = out, true
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() { c, err := Run(tctx(t), cfg); done <- result{c, err} }()
	release := sync.OnceFunc(func() { close(out.gate) })
	defer release()
	// The copier is stuck writing "stall" with nothing else read: the
	// rank's burst stays in the pipe until well over pipeIdle after the
	// rank has exited (been reaped).
	select {
	case <-out.entered:
	case r := <-done:
		t.Fatalf("code %d err %v\n%s", r.code, r.err, &errOut)
	}
	if err := os.WriteFile(dir+"/go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for pid := 0; pid == 0 || syscall.Kill(pid, 0) == nil; pid = readPid(dir + "/pid") {
		if time.Now().After(deadline) {
			t.Fatalf("rank did not exit (pid %d):\n%s", pid, &errOut)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(2 * pipeIdle)
	release()
	r := <-done
	if r.code != 0 || r.err != nil {
		t.Fatalf("code %d err %v\n%s", r.code, r.err, &errOut)
	}
	want := "stall\n" + strings.Repeat(strings.Repeat("x", spewLen-1)+"\n", spewLines)
	if got := out.String(); got != want {
		t.Fatalf("the rank wrote %d bytes and exited 0; %d bytes (%d lines) were forwarded",
			len(want), len(got), strings.Count(got, "\n"))
	}
}

// TestSilentChildHoldingOutput: a child that escaped the rank's process
// group and keeps the output pipes open without writing does not keep the
// launcher waiting past an idle period.
func TestSilentChildHoldingOutput(t *testing.T) {
	var out, errOut syncBuf
	pidFile := t.TempDir() + "/pid"
	t.Cleanup(func() {
		if pid := readPid(pidFile); pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	cfg := cfgFor("escape", 1, &out, &errOut, "PIDFILE="+pidFile)
	done := make(chan struct{})
	var code int
	var err error
	go func() { code, err = Run(tctx(t), cfg); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("Run still waiting on the output of a silent child (idle limit %v):\n%s%s", pipeIdle, &out, &errOut)
	}
	if code != 0 || err != nil || !strings.Contains(out.String(), "[rank 0] started\n") {
		t.Fatalf("code %d err %v\n%s%s", code, err, &out, &errOut)
	}
}

// TestLeftoverChildrenStopped: processes a rank started do not outlive the
// job, whether the rank failed, finished before another failed, or the
// job succeeded, even ignoring SIGTERM. Each rank has its own process group
// and Pdeathsig covers only the rank: they used to be left running.
func TestLeftoverChildrenStopped(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		code         int
	}{
		{"child of the failed rank", `if [ "$RANK" = 0 ]; then sleep 60 & echo $! > "$D/pid"; exit 3; fi; exec sleep 60`, 3},
		// Rank 0 fails only once rank 1 has exited (been reaped).
		{"child of a rank that exited 0 before the failure", `if [ "$RANK" = 1 ]; then sleep 60 & echo $! > "$D/pid"; echo $$ > "$D/r1.tmp"; mv "$D/r1.tmp" "$D/r1"; exit 0; fi
			until [ -s "$D/r1" ]; do sleep 0.01; done; while kill -0 "$(cat "$D/r1")" 2>/dev/null; do sleep 0.01; done; exit 3`, 3},
		{"child left by a successful job", `if [ "$RANK" = 0 ]; then sleep 60 & echo $! > "$D/pid"; fi; exit 0`, 0},
		// Rank 0 exits once the child ignores SIGTERM.
		{"child ignoring SIGTERM", `if [ "$RANK" = 0 ]; then sh -c 'trap "" TERM; echo $$ > "$D/p"; mv "$D/p" "$D/pid"; exec sleep 60' &
			until [ -s "$D/pid" ]; do sleep 0.01; done; fi; exit 0`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var out, errOut syncBuf
			code, err := Run(tctx(t), Config{N: 2, Prog: "sh", Args: []string{"-c", tc.script}, Env: []string{"D=" + dir},
				Stdout: &out, Stderr: &errOut, Grace: 500 * time.Millisecond})
			pid := readPid(dir + "/pid")
			if pid <= 0 {
				t.Fatalf("no child pid written; code %d err %v\n%s%s", code, err, &out, &errOut)
			}
			defer func() {
				if !gone(pid) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}()
			if code != tc.code {
				t.Fatalf("code %d (want %d) err %v\n%s%s", code, tc.code, err, &out, &errOut)
			}
			// Run waits for the process groups to empty; allow for a slow
			// reaper of the orphans all the same.
			deadline := time.Now().Add(10 * time.Second)
			for !gone(pid) {
				if time.Now().After(deadline) {
					t.Fatalf("Run returned %d (%v) but the rank's child %d is still running", code, err, pid)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// writePid writes pid to $PIDFILE whole (readPid may look at any moment).
func writePid(pid int) {
	f := os.Getenv("PIDFILE")
	os.WriteFile(f+".tmp", []byte(strconv.Itoa(pid)), 0o644)
	os.Rename(f+".tmp", f)
}

func readPid(file string) int {
	b, _ := os.ReadFile(file)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// gone reports whether pid has exited (a zombie not yet reaped counts).
func gone(pid int) bool {
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return os.IsNotExist(err)
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestLongLines: with the prefix a line longer than maxLine becomes several
// prefixed lines (each says its rank); without it lines stay whole, even
// past maxWhole (written in pieces, no newline inserted), and a final line
// without a newline gets one.
func TestLongLines(t *testing.T) {
	x := func(n int) string { return strings.Repeat("x", n) }
	for _, tc := range []struct {
		name, prefix, in, want string
	}{
		{"prefixed", "[rank 0] ", x(100000) + "\n", "[rank 0] " + x(maxLine) + "\n[rank 0] " + x(100000-maxLine) + "\n"},
		{"whole", "", x(100000) + "\n" + "next\n", x(100000) + "\nnext\n"},
		{"whole, no final newline", "", x(100000), x(100000) + "\n"},
		{"past maxWhole", "", x(maxWhole+maxLine+5) + "\n", x(maxWhole+maxLine+5) + "\n"},
	} {
		var m outMux
		var out syncBuf
		m.copyLines(&out, strings.NewReader(tc.in), tc.prefix)
		if got := out.String(); got != tc.want {
			t.Errorf("%s: %d bytes in %d lines, want %d bytes in %d lines", tc.name,
				len(got), strings.Count(got, "\n"), len(tc.want), strings.Count(tc.want, "\n"))
		}
	}
}

// TestLongLineNotInterleaved: without the prefix, lines another rank writes
// while a long line is still coming are neither blocked until it ends (the
// ranks may be waiting on each other) nor written into it.
func TestLongLineNotInterleaved(t *testing.T) {
	var m outMux
	var out syncBuf
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		m.copyLines(&out, pr, "")
		close(done)
	}()
	long := strings.Repeat("x", maxLine+4464)
	pw.Write([]byte(long)) // returns once the copier has read it all
	other := make(chan struct{})
	go func() {
		m.copyLines(&out, strings.NewReader("other 1\nother 2\n"), "")
		close(other)
	}()
	select {
	case <-other:
	case <-time.After(20 * time.Second):
		t.Fatal("another rank's lines wait for the end of an unfinished long line")
	}
	pw.Write([]byte("y\n"))
	pw.Close()
	<-done
	if got, want := out.String(), "other 1\nother 2\n"+long+"y\n"; got != want {
		t.Errorf("got %d bytes in %d lines, want %d bytes in %d lines", len(got), strings.Count(got, "\n"), len(want), strings.Count(want, "\n"))
	}
}
