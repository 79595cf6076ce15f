package rendezvous

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDrainIgnoresUnauthenticated: a client that connects and never presents
// the token (or reconnects every second) does not hold up Drain, which a
// hosting rank 0 runs before it stops the store at exit.
func TestDrainIgnoresUnauthenticated(t *testing.T) {
	tok := NewToken()
	s, err := NewServer("127.0.0.1:0", tok)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	raw, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	c, err := Dial(context.Background(), s.Addr(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	if !s.Drain(ctx) {
		t.Fatalf("Drain waited %v for a client that never authenticated", time.Since(start))
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Drain took %v", d)
	}
}

// TestJobIDMismatch: a rank with the right token but another job id fails at
// once, in words that name both ids and the variable to fix.
func TestJobIDMismatch(t *testing.T) {
	tok := NewToken()
	s, err := NewServer("127.0.0.1:0", tok)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	host, port, _ := net.SplitHostPort(s.Addr())
	p, _ := strconv.Atoi(port)
	env := func(rank int, job string) Env { // every rank dials the store s hosts
		return Env{Rank: rank, WorldSize: 2, LocalWorldSize: 2, LocalRank: rank, MasterAddr: host, MasterPort: p, Token: tok, JobID: job, Store: s.Addr()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c0, clean0, err := Bootstrap(ctx, env(0, "job-a"))
	if err != nil {
		t.Fatal(err)
	}
	defer clean0()
	_ = c0
	start := time.Now()
	_, clean1, err := Bootstrap(ctx, env(1, "job-b"))
	if err == nil {
		clean1()
		t.Fatal("a rank with another job id joined the store")
	}
	if !errors.Is(err, ErrBadEnv) {
		t.Errorf("error %q does not wrap ErrBadEnv", err)
	}
	for _, w := range []string{`"job-a"`, `"job-b"`, VarJobID} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %s", err, w)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v", d)
	}
	// The same job id still joins.
	_, clean2, err := Bootstrap(ctx, env(1, "job-a"))
	if err != nil {
		t.Fatal(err)
	}
	clean2()
}
