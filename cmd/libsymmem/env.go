package main

// #include <stdlib.h>
// extern char **environ;
// static const char *symmem_env_at(int i) { return environ[i]; }
import "C"

import (
	"os"
	"strings"
	"sync/atomic"
)

// envSynced: the caller synced the environment itself (symmem_sync_env)
// for the next symmem_init, holding whatever lock guards its environment.
var envSynced atomic.Bool

//export symmem_sync_env
func symmem_sync_env() {
	syncEnv()
	envSynced.Store(true)
}

// syncEnvForInit is what a world's start does: sync, unless the caller
// did just before (Python, under the GIL: ctypes releases it during
// symmem_init, and another thread's os.environ write may move libc's
// environ while it is read).
func syncEnvForInit() {
	if !envSynced.Swap(false) {
		syncEnv()
	}
}

// syncEnv makes the Go side's environment the process's environment as it
// is now. A Go library loaded into a C or Python process takes its copy of
// the environment from the process's start: a variable the host set since
// (Python's os.environ["RANK"] = ..., C's setenv) was invisible to
// EnvFromOS and the backends, while NCCL, reading libc's, saw it. Called
// where a world starts, the one place the library reads its environment.
func syncEnv() {
	live := map[string]string{}
	for i := 0; ; i++ {
		p := C.symmem_env_at(C.int(i))
		if p == nil {
			break
		}
		k, v, ok := strings.Cut(C.GoString(p), "=")
		if _, seen := live[k]; ok && k != "" && !seen { // the first, as getenv reads
			live[k] = v
		}
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "" {
			if _, ok := live[k]; !ok {
				os.Unsetenv(k)
			}
		}
	}
	for k, v := range live {
		if cur, ok := os.LookupEnv(k); !ok || cur != v {
			os.Setenv(k, v) // a name Go refuses (NUL in it) stays as it was
		}
	}
}
