// Package launch starts the ranks of a local job: it hosts the job's
// rendezvous store on a loopback port of its own, starts N copies of a
// program with the torchrun-compatible environment (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT — a port left free
// for torch's init_process_group("env://")) plus SYMMEM_STORE (the store's
// address), SYMMEM_TOKEN and SYMMEM_JOB_ID, prefixes each output line with
// "[rank r] ", forwards signals, and when one rank fails stops the others
// (SIGTERM, then SIGKILL after a grace period) and reports that rank's status;
// processes the ranks started are stopped with them, and when the job ends.
// It is the library behind `symmem launch`; tests and the bench use Run to
// start ranks by re-executing themselves.
package launch
