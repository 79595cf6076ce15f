// Package launch starts the ranks of a local job: it hosts the job's
// rendezvous store on loopback, starts N copies of a program with the
// torchrun-compatible environment (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) plus SYMMEM_TOKEN,
// SYMMEM_JOB_ID and SYMMEM_STORE_HOSTED=1, prefixes each output line with
// "[rank r] ", forwards signals, and when one rank fails stops the others
// (SIGTERM, then SIGKILL after a grace period) and reports that rank's status.
// It is the library behind `symmem launch`; tests and the bench use Run to
// start ranks by re-executing themselves.
package launch
