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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/symmem/symmem/rendezvous"
)

// Defaults and limits.
const (
	DefaultGrace = 5 * time.Second // SIGTERM -> SIGKILL
	MaxRanks     = 1024
	// ExitTimeout is the exit code when Config.Timeout expires (as timeout(1)).
	ExitTimeout = 124
)

// ErrBadConfig is wrapped by errors about the Config itself.
var ErrBadConfig = errors.New("launch: bad config")

// Config describes one local job.
type Config struct {
	N    int      // number of ranks, 1..MaxRanks
	Prog string   // program to run (looked up in PATH if it has no slash)
	Args []string // its arguments
	// Stdout and Stderr receive the ranks' output, each line prefixed with
	// "[rank r] " (a line longer than 64 KiB as several prefixed lines).
	// Nil means os.Stdout / os.Stderr.
	Stdout, Stderr io.Writer
	// Env holds extra KEY=VALUE entries for every rank, on top of this
	// process's environment and below the rank variables the launcher sets.
	Env []string
	// Timeout, if positive, bounds the whole job: when it passes every rank is
	// stopped and Run returns ExitTimeout.
	Timeout time.Duration
	// Grace is how long stopped ranks get between SIGTERM and SIGKILL
	// (DefaultGrace if zero). It is also what processes a rank started and
	// left behind get when the last rank has exited, even after success: a
	// job leaves nothing running (torchrun signals only ranks still running;
	// their leftovers would hold GPU memory and the output past the job's
	// end). A rank that wants a process to outlive the job starts it in a
	// session of its own (setsid).
	Grace time.Duration
	// NoPrefix turns the "[rank r] " prefix off. Lines then stay whole
	// however long; one past 16 MiB is written in pieces (no newline
	// inserted) that other ranks' lines may fall between.
	NoPrefix bool
	// MasterPort is the MASTER_PORT the ranks see, left free for torch's own
	// store (init_process_group("env://") binds it on rank 0). 0 picks a
	// port that is free at launch time. symmem's store is elsewhere
	// (SYMMEM_STORE).
	MasterPort int
	// Hosts, above 1, makes the job act as that many hosts on this machine
	// (the multi-host test facility): N/Hosts consecutive ranks per host,
	// each host with its own SYMMEM_HOST and NCCL_HOSTID (so neither
	// symmem nor NCCL lets ranks of different hosts share memory: NCCL
	// then takes its network transport between them), LOCAL_RANK and
	// LOCAL_WORLD_SIZE within the host, GROUP_RANK the host's index (as
	// torchrun's node rank), and its own block of N/Hosts GPUs of
	// CUDA_VISIBLE_DEVICES (default 0..N-1) where that list has N entries
	// or more; with N/Hosts to N-1 entries every host gets the first
	// N/Hosts (as real hosts each have GPUs 0..L-1: on one machine a GPU
	// then serves one rank of each host, in separate contexts). 0 or 1:
	// one host.
	Hosts int
	// Signals, if set, are forwarded to every running rank (the CLI feeds it
	// from signal.Notify for SIGINT, SIGTERM, SIGHUP and SIGQUIT). After a forwarded signal,
	// ranks that have not exited Grace after the first failure are SIGKILLed.
	Signals <-chan os.Signal
}

type exit struct {
	rank  int
	state *os.ProcessState
	err   error
}

// Run starts the job and waits for it. exitCode is 0 when every rank exited 0;
// otherwise it is the status of the first rank that failed (128+signal for a
// rank killed by a signal), and err says which rank it was. err is also set,
// with a non-zero code, when the job could not start, ctx ended, or Timeout
// passed.
func Run(ctx context.Context, cfg Config) (exitCode int, err error) {
	if cfg.N < 1 || cfg.N > MaxRanks {
		return 2, fmt.Errorf("%w: -n %d: need between 1 and %d ranks", ErrBadConfig, cfg.N, MaxRanks)
	}
	if cfg.Hosts < 0 || cfg.Hosts > cfg.N || (cfg.Hosts > 1 && cfg.N%cfg.Hosts != 0) {
		return 2, fmt.Errorf("%w: %d hosts for %d ranks: want a divisor of the rank count (every host runs as many ranks)", ErrBadConfig, cfg.Hosts, cfg.N)
	}
	if cfg.Prog == "" {
		return 2, fmt.Errorf("%w: no program given: usage: symmem launch -n N [--] prog args...", ErrBadConfig)
	}
	prog, err := exec.LookPath(cfg.Prog)
	if err != nil {
		return 127, fmt.Errorf("%w: cannot run %q: %w", ErrBadConfig, cfg.Prog, err)
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	token, jobID := rendezvous.NewToken(), rendezvous.NewJobID()
	srv, err := rendezvous.NewServer("127.0.0.1:0", token)
	if err != nil {
		return 1, fmt.Errorf("launch: hosting the store: %w", err)
	}
	defer srv.Close()
	masterPort := cfg.MasterPort
	if masterPort == 0 {
		if masterPort, err = freePort(); err != nil {
			return 1, fmt.Errorf("launch: finding a free MASTER_PORT: %w", err)
		}
	} else if masterPort < 1 || masterPort > 65535 {
		return 2, fmt.Errorf("%w: master port %d: want 1..65535", ErrBadConfig, masterPort)
	}

	j := &job{cfg: cfg, exits: make(chan exit, cfg.N)}
	base := append(os.Environ(), cfg.Env...)
	var devices []string
	if cfg.Hosts > 1 {
		devices = VisibleDevices(cfg.N, base)
	}
	for r := range cfg.N {
		env := append(base[:len(base):len(base)], RankEnv(cfg.N, cfg.Hosts, r, devices)...)
		env = append(env,
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(masterPort),
			rendezvous.VarStore+"="+srv.Addr(), rendezvous.VarToken+"="+token, rendezvous.VarJobID+"="+jobID,
		)
		if err := j.start(r, prog, env); err != nil {
			j.stopAll(syscall.SIGKILL)
			j.drain()
			return 1, fmt.Errorf("launch: starting rank %d (%s): %w", r, cfg.Prog, err)
		}
	}
	return j.wait(ctx)
}

// RankEnv is rank r's own variables in a job of n ranks on hosts hosts
// (Config.Hosts; n a multiple of hosts); devices is the GPU list the hosts
// split (VisibleDevices). Run uses it; so may a test harness that starts
// ranks itself.
func RankEnv(n, hosts, r int, devices []string) []string {
	env := []string{"RANK=" + strconv.Itoa(r), "WORLD_SIZE=" + strconv.Itoa(n)}
	if hosts <= 1 {
		return append(env, "LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(n))
	}
	per := n / hosts
	h := r / per
	name := "host" + strconv.Itoa(h)
	env = append(env, "LOCAL_RANK="+strconv.Itoa(r%per), "LOCAL_WORLD_SIZE="+strconv.Itoa(per),
		"GROUP_RANK="+strconv.Itoa(h), rendezvous.VarHost+"="+name, "NCCL_HOSTID="+name)
	switch {
	case len(devices) >= n:
		env = append(env, "CUDA_VISIBLE_DEVICES="+strings.Join(devices[h*per:(h+1)*per], ","))
	case len(devices) >= per:
		env = append(env, "CUDA_VISIBLE_DEVICES="+strings.Join(devices[:per], ","))
	}
	return env
}

// VisibleDevices is the GPU list simulated hosts split: the last
// CUDA_VISIBLE_DEVICES of env (an environment as os.Environ gives it),
// else 0..n-1. Fewer entries than ranks
// (ranks sharing GPUs) leave every rank the list it has.
func VisibleDevices(n int, env []string) []string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "CUDA_VISIBLE_DEVICES="); ok {
			if v = strings.TrimSpace(v); v == "" {
				return nil
			}
			return strings.Split(v, ",")
		}
	}
	devs := make([]string, n)
	for i := range devs {
		devs[i] = strconv.Itoa(i)
	}
	return devs
}

// freePort asks the kernel for a free loopback port and releases it: torch's
// rank 0 binds it moments later (another process could take it in between;
// pass Config.MasterPort to pin one).
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

type job struct {
	cfg   Config
	mux   outMux
	exits chan exit
	copy  sync.WaitGroup

	mu sync.Mutex
	// pgids[r] is rank r's process group (its pid), kept after the rank
	// exits because its children stay in it; 0 once found empty (the id
	// may then be reused).
	pgids   []int
	running int
}

// pipeIdle is how long a rank's output pipe may stay silent after the rank
// exited before the launcher stops reading it: a child of the rank that
// escaped its process group may hold the pipe open indefinitely.
const pipeIdle = time.Second

// tailReader reads a rank's output pipe. Once exited is set it gives up when
// the pipe has had no data for pipeIdle (each read renews the deadline, so
// output that keeps coming, or waits on a slow consumer, is never cut).
type tailReader struct {
	f      *os.File
	exited *atomic.Bool
}

func (t tailReader) Read(p []byte) (int, error) {
	for {
		start, armed := time.Now(), t.exited.Load()
		if armed {
			t.f.SetReadDeadline(start.Add(pipeIdle))
		}
		n, err := t.f.Read(p)
		// A deadline we did not set, or that passed early, is the exit's
		// wake-up (even with data waiting): read again, timing a full
		// idle period.
		if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) && (!armed || time.Since(start) < pipeIdle) {
			continue
		}
		return n, err
	}
}

func (j *job) start(r int, prog string, env []string) error {
	cmd := exec.Command(prog, j.cfg.Args...)
	cmd.Env = env
	// Own process group: terminal signals reach only the launcher (which
	// forwards them once), and stopping a rank stops its children too.
	// Pdeathsig: ranks die with the launcher even if it is SIGKILLed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return err
	}
	prefix := rankPrefix(r, j.cfg.NoPrefix)
	exited := new(atomic.Bool)
	copyOut := func(w io.Writer, f *os.File) {
		defer j.copy.Done()
		defer f.Close()
		j.mux.copyLines(w, tailReader{f, exited}, prefix)
	}
	j.copy.Add(2)
	go copyOut(j.cfg.Stdout, outR)
	go copyOut(j.cfg.Stderr, errR)
	j.mu.Lock()
	j.pgids = append(j.pgids, cmd.Process.Pid)
	j.running++
	j.mu.Unlock()
	go func() {
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = nil
		}
		// The rank's children may keep the pipes open: from now on the
		// copiers stop at the first idle period. Wake any blocked read so
		// that it starts timing one (errors: the copier already closed f).
		exited.Store(true)
		outR.SetReadDeadline(time.Now())
		errR.SetReadDeadline(time.Now())
		j.exits <- exit{rank: r, state: cmd.ProcessState, err: err}
	}()
	return nil
}

// stopAll sends sig to every rank's process group that still has members:
// those of ranks that exited may hold the ranks' children.
func (j *job) stopAll(sig syscall.Signal) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for r, g := range j.pgids {
		if g != 0 && syscall.Kill(-g, sig) == syscall.ESRCH {
			j.pgids[r] = 0
		}
	}
}

// lingering reports whether a rank's process group still has a member that
// is not a zombie: a dead orphan waits on a reaper that may never come (a
// container's PID 1 that doesn't reap), and kill(2) still counts it.
func (j *job) lingering() bool {
	j.stopAll(0)
	groups := map[int]bool{}
	j.mu.Lock()
	for _, g := range j.pgids {
		if g != 0 {
			groups[g] = true
		}
	}
	j.mu.Unlock()
	if len(groups) == 0 {
		return false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range ents {
		if c := e.Name()[0]; c < '0' || c > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		// "pid (comm) state ppid pgrp ...": comm may hold spaces and ')'.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 2 && f[0] != "Z" {
			if g, _ := strconv.Atoi(f[2]); groups[g] {
				return true
			}
		}
	}
	return false
}

func (j *job) drain() {
	for {
		j.mu.Lock()
		n := j.running
		j.mu.Unlock()
		if n == 0 {
			break
		}
		j.reap(<-j.exits)
	}
	j.copy.Wait()
}

func (j *job) reap(e exit) {
	j.mu.Lock()
	j.running--
	j.mu.Unlock()
}

func status(e exit) (int, string) {
	if e.err != nil || e.state == nil {
		return 1, fmt.Sprintf("could not be waited for: %v", e.err)
	}
	if ws, ok := e.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), "was killed by signal " + ws.Signal().String()
	}
	c := e.state.ExitCode()
	return c, "exited with status " + strconv.Itoa(c)
}

// wait supervises the running ranks until all have exited.
func (j *job) wait(ctx context.Context) (int, error) {
	var timeout <-chan time.Time
	if j.cfg.Timeout > 0 {
		t := time.NewTimer(j.cfg.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var kill <-chan time.Time
	stopping, forwarded := false, false
	code, failErr := 0, error(nil)
	stop := func() {
		if stopping {
			return
		}
		stopping = true
		// After a forwarded signal every rank already has one to act on:
		// don't pile SIGTERM on top, just SIGKILL after the grace period.
		if !forwarded {
			j.stopAll(syscall.SIGTERM)
		}
		kill = time.After(j.cfg.Grace)
	}
	ctxDone := ctx.Done()
	for {
		j.mu.Lock()
		n := j.running
		j.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case e := <-j.exits:
			j.reap(e)
			if c, what := status(e); c != 0 && failErr == nil {
				code = c
				failErr = fmt.Errorf("launch: rank %d %s", e.rank, what)
				if n > 1 {
					failErr = fmt.Errorf("%w; stopped the other ranks", failErr)
				}
				stop()
			}
		case sig := <-j.cfg.Signals:
			if s, ok := sig.(syscall.Signal); ok {
				forwarded = true
				j.stopAll(s)
			}
		case <-timeout:
			timeout = nil
			if failErr == nil {
				code = ExitTimeout
				failErr = fmt.Errorf("launch: job exceeded its timeout of %v; stopped all ranks", j.cfg.Timeout)
			}
			stop()
		case <-ctxDone:
			ctxDone = nil
			if failErr == nil {
				code = 1
				failErr = fmt.Errorf("launch: stopped all ranks: %w", ctx.Err())
			}
			stop()
		case <-kill:
			kill = nil
			j.stopAll(syscall.SIGKILL)
		}
	}
	// Every rank has exited; what they started must not outlive the job
	// (Config.Grace): stop it as the ranks are stopped, and wait for it,
	// since it may hold GPU memory and the output pipes.
	if j.lingering() {
		stop()
		poll := time.NewTicker(20 * time.Millisecond)
		defer poll.Stop()
		for kill != nil && j.lingering() {
			select {
			case <-poll.C:
			case <-kill:
				kill = nil
			}
		}
		j.stopAll(syscall.SIGKILL)
	}
	j.copy.Wait()
	return code, failErr
}
