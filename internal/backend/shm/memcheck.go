package shm

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/symmem/symmem/pool"
)

// CheckFits reports whether segments of size bytes fit in the host memory
// left now (pool.MemoryChecker). Segments are memfd memory (shmem: counted
// as memory, not against /dev/shm's size), filled lazily, so an
// allocation that does not fit would succeed and then be ended by the OOM
// killer once touched. Every local rank creates its own copy of each
// segment, so the demand is size times the local ranks; the limit is the
// kernel's MemAvailable, or what the cgroup still allows if that is less.
func (p *Provider) CheckFits(size int64) error {
	avail, what, ok := hostAvailable()
	if !ok {
		return nil // cannot tell (not Linux, or /proc unreadable)
	}
	local := int64(max(p.local, 1))
	if need := size * local; need > avail {
		return fmt.Errorf("%w: %s of host memory asked (%s per rank × %d local ranks), %s available (%s)",
			pool.ErrNoMemory, human(need), human(size), local, human(avail), what)
	}
	return nil
}

// hostAvailable returns the bytes of memory this process may still use.
func hostAvailable() (avail int64, what string, ok bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if kb, found := strings.CutPrefix(sc.Text(), "MemAvailable:"); found {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64)
			if err == nil {
				avail, what, ok = n<<10, "MemAvailable in /proc/meminfo", true
			}
		}
	}
	if !ok {
		return 0, "", false
	}
	// cgroup v2: memory.max minus memory.current of this process's cgroup.
	lim, err1 := os.ReadFile("/sys/fs/cgroup/memory.max")
	cur, err2 := os.ReadFile("/sys/fs/cgroup/memory.current")
	if err1 == nil && err2 == nil {
		l, e1 := strconv.ParseInt(string(bytes.TrimSpace(lim)), 10, 64)
		c, e2 := strconv.ParseInt(string(bytes.TrimSpace(cur)), 10, 64)
		if e1 == nil && e2 == nil && l-c < avail {
			avail, what = max(l-c, 0), "the cgroup's memory.max minus memory.current"
		}
	}
	return avail, what, true
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
