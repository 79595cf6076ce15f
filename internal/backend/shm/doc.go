// Package shm is the CPU backend: symmetric memory is shared memory between
// the local processes (ranks) of a job.
//
// It owns three things:
//
//   - Segments (Provider): each pool segment is a memfd file of the
//     requested size mapped MAP_SHARED into this process. memfd files have no
//     name in any file system, so nothing outlives the processes that map
//     them: a rank that exits without Close leaves no /dev/shm entry behind.
//   - Groups (Group): the store-based AllGather the pool uses to verify
//     agreement (keys under symmem/<job>/shm/<group>#<generation>/ag/<seq>/,
//     deleted by the last rank to read them), registration (a segment's
//     memfd is passed to every peer of the group over rendezvous.FDExchange
//     and each peer maps it, so every rank can address every peer's copy of
//     each registered segment; the received fd is closed once mapped), and
//     signal pads: each rank owns a memfd page that every peer maps, with
//     one word per target peer holding the epoch value this rank last
//     signalled to it (the protocol of package plan: values only grow,
//     nothing is reset). Waits poll (200 us when every rank has a CPU of
//     its own, else 20 us), then sleep on a futex, always bounded by the
//     group timeout; a peer that exits is noticed through a
//     pidfd and named in the error. A collective that fails midway leaves
//     the group broken (errs.Broken): the ranks' epochs no longer agree, and
//     later store exchanges on the group fail at once too. After the target
//     lines each pad holds two record slots: the in-band agreement
//     (agree.go, agree.Agreer) through which every collective's argument
//     record and every Scope.End's allocation state are compared across the
//     ranks before any data moves; a difference is an error on every rank
//     and leaves the group usable. The pad's last line holds the rank's
//     state (closing: World.Close called Leave; failed: the group broke
//     there), set with a futex wake, so waits for a rank that left end at
//     once (watch.go); store exchanges watch the pidfds and states too.
//   - Execution (Group.Run): the schedules of package plan run on the direct
//     path — each rank reads its peers' symmetric memory and reduces with
//     package reduce. All-reduces take the one-shot plan while the tensor
//     times the peers is at most 1 MiB out of place (64 KiB in place), the
//     two-shot plan above.
//     When the host has more CPUs than local ranks, every stage from
//     256 KiB is cut into about two pieces per worker (32 KiB to 2 MiB)
//     that the caller and the group's crew of helper goroutines (the CPUs
//     divided among the local ranks, at most 16 per rank) claim in turn;
//     helpers poll for the next stage for 200 us before they sleep, as
//     waits on peers do. Polling loops yield the processor only every
//     16k rounds (each yield takes the scheduler's global lock and may
//     wake a thread), and a call allocates nothing (no GC cycles from
//     back-to-back collectives).
//
// Every rank of a group must live on this host: the backend refuses groups
// that span hosts.
package shm
