package main

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// --share-device reaches every rank as SYMMEM_SHARE_DEVICE=1 (what Init and
// the GPU backend read); without it the variable is not set.
func TestLaunchShareDevice(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"launch", "--share-device", "-n", "2", "--no-prefix", "--", "sh", "-c", "echo share=${SYMMEM_SHARE_DEVICE:-unset}"}, "share=1"},
		{[]string{"launch", "-n", "2", "--no-prefix", "--", "sh", "-c", "echo share=${SYMMEM_SHARE_DEVICE:-unset}"}, "share=unset"},
	} {
		out, errs, err := cli(t, tc.args...)
		if err != nil {
			t.Fatalf("symmem %v: %v\n%s\n%s", tc.args, err, out, errs)
		}
		if got := strings.Count(out, tc.want); got != 2 {
			t.Errorf("symmem %v: %q printed by %d ranks, want 2:\n%s", tc.args, tc.want, got, out)
		}
	}
}

// TestLaunchLongLine: with --no-prefix a line longer than the launcher's
// 64 KiB read buffer comes out whole (a JSON document on one line); with
// the prefix it becomes several lines, each saying its rank.
func TestLaunchLongLine(t *testing.T) {
	const spew = `head -c 100000 /dev/zero | tr "\0" x; echo`
	out, errs, err := cli(t, "launch", "-n", "1", "--no-prefix", "--", "sh", "-c", spew)
	if err != nil {
		t.Fatalf("%v: %s", err, errs)
	}
	if want := strings.Repeat("x", 100000) + "\n"; out != want {
		t.Errorf("--no-prefix: one 100000-byte line came out as %d lines, %d bytes", strings.Count(out, "\n"), len(out))
	}
	out, errs, err = cli(t, "launch", "-n", "1", "--", "sh", "-c", spew)
	if err != nil {
		t.Fatalf("%v: %s", err, errs)
	}
	if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(lines) != 2 || strings.Count(out, "x") != 100000 ||
		!strings.HasPrefix(lines[0], "[rank 0] x") || !strings.HasPrefix(lines[1], "[rank 0] x") {
		t.Errorf("prefixed: %d lines, %d x's; want 2 lines starting [rank 0], 100000 x's", len(lines), strings.Count(out, "x"))
	}
}

// TestLaunchSignalStopsJob: a signal to the launcher reaches the ranks and
// stops the processes they started, and the launcher exits with the status
// of the rank the signal killed. SIGHUP (a closed terminal or ssh session)
// and SIGQUIT used to kill the launcher alone: the ranks died of Pdeathsig,
// but their children (here a sleep each) kept running.
func TestLaunchSignalStopsJob(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "launch", "-n", "2", "--grace", "200ms", "--no-prefix", "--", "sh", "-c", "sleep 1000 & echo $!; wait")
			cmd.Env = append(cleanEnv(), mainEnv+"=1")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var pids []int
			sc := bufio.NewScanner(stdout)
			for len(pids) < 2 && sc.Scan() {
				pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
				if err != nil {
					t.Fatalf("line %q: %v", sc.Text(), err)
				}
				pids = append(pids, pid)
			}
			// Only a failed test leaves them: kill them then, never pids
			// that were seen gone (they may belong to others by now).
			defer func() {
				if t.Failed() {
					for _, pid := range pids {
						if running(pid) {
							syscall.Kill(pid, syscall.SIGKILL)
						}
					}
				}
			}()
			if len(pids) != 2 {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("read %d pids of the ranks' children, want 2", len(pids))
			}
			cmd.Process.Signal(sig)
			err = cmd.Wait()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(sig) {
				t.Errorf("launcher: %v, want exit status %d (a rank killed by %v)", err, 128+int(sig), sig)
			}
			deadline := time.Now().Add(3 * time.Second)
			for _, pid := range pids {
				for running(pid) {
					if time.Now().After(deadline) {
						t.Fatalf("%v: process %d, started by a rank, outlived the job", sig, pid)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
}

// running reports whether pid is a live process (not gone, not a zombie
// waiting for a reaper).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}
