package rendezvous

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// roleVar makes the re-executed test binary run a child role instead of tests.
const roleVar = "SYMMEM_RENDEZVOUS_TEST_ROLE"

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

func runRole(role string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if role == "presence" { // announce as rank 5 and exit without leaving, as a crash would
		c, err := Dial(ctx, os.Getenv("SYMMEM_TEST_STORE"), os.Getenv("SYMMEM_TOKEN"))
		if err != nil {
			return err
		}
		if _, err := c.Announce(ctx, "job/presence/5", "job/presence/gone", []byte("rank 5 exited")); err != nil {
			return err
		}
		os.Exit(0)
	}
	e, err := EnvFromOS()
	if err != nil {
		return err
	}
	switch role {
	case "bootstrap":
		c, cleanup, err := Bootstrap(ctx, e)
		if err != nil {
			return err
		}
		if err := c.Set(ctx, fmt.Sprintf("hello/%d", e.Rank), []byte(strconv.Itoa(e.Rank*10))); err != nil {
			return err
		}
		keys := make([]string, e.WorldSize)
		for i := range keys {
			keys[i] = fmt.Sprintf("hello/%d", i)
		}
		vals, err := c.Wait(ctx, keys...)
		if err != nil {
			return err
		}
		for i, v := range vals {
			if string(v) != strconv.Itoa(i*10) {
				return fmt.Errorf("hello/%d = %q", i, v)
			}
		}
		if err := c.Barrier(ctx, "after-hello", e.WorldSize); err != nil {
			return err
		}
		return cleanup()
	case "fdsend":
		x, err := NewFDExchange(e)
		if err != nil {
			return err
		}
		defer x.Close()
		fd, err := unix.MemfdCreate("symmem-test", unix.MFD_CLOEXEC)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if _, err := unix.Pwrite(fd, []byte("hello-from-child"), 0); err != nil {
			return err
		}
		if err := x.Send(ctx, 0, "seg", []int{fd}); err != nil {
			return err
		}
		back, err := x.Recv(ctx, 0, "ack")
		if err != nil {
			return err
		}
		defer closeFDs(back)
		var a, b unix.Stat_t
		unix.Fstat(fd, &a)
		unix.Fstat(back[0], &b)
		if a.Ino != b.Ino || a.Dev != b.Dev {
			return fmt.Errorf("fd sent back is another file: ino %d vs %d", a.Ino, b.Ino)
		}
		buf := make([]byte, 4)
		if _, err := unix.Pread(fd, buf, 100); err != nil || string(buf) != "pong" {
			return fmt.Errorf("parent's write not visible through our memfd: %q %v", buf, err)
		}
		return nil
	case "fdbadtoken":
		x, err := NewFDExchange(e)
		if err != nil {
			return err
		}
		defer x.Close()
		fd, err := unix.MemfdCreate("symmem-test", unix.MFD_CLOEXEC)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		err = x.Send(ctx, 0, "seg", []int{fd})
		if !errors.Is(err, ErrTokenRefused) {
			return fmt.Errorf("send with wrong token: err = %v, want ErrTokenRefused", err)
		}
		fmt.Println("refused as expected:", err)
		return nil
	}
	return fmt.Errorf("unknown role %q", role)
}

// startRole re-executes the test binary in role with env (on top of ours).
func startRole(t *testing.T, role string, env map[string]string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleVar+"="+role)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

func rankEnv(rank, world int, addr string, port int, token, job string) map[string]string {
	return map[string]string{
		"RANK": strconv.Itoa(rank), "WORLD_SIZE": strconv.Itoa(world),
		"LOCAL_RANK": strconv.Itoa(rank), "LOCAL_WORLD_SIZE": strconv.Itoa(world),
		"MASTER_ADDR": addr, "MASTER_PORT": strconv.Itoa(port),
		"SYMMEM_TOKEN": token, "SYMMEM_JOB_ID": job, VarStoreHosted: "", VarStore: "", VarStorePort: "",
		VarRunID: "",
	}
}
