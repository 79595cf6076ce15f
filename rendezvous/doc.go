// Package rendezvous owns how the ranks of one job find each other:
//
//   - a token-guarded TCP key-value store (Server, Client) with set, get, add,
//     compare-set, blocking wait and delete, plus a Barrier built on them,
//     and presences (Announce): a rank's standing connection, whose end
//     without Leave the store records in the job's gone list, so that
//     peers on any host learn that a rank exited;
//   - the torchrun-compatible environment (Env, EnvFromOS) and Bootstrap, which
//     dials the launcher's store (SYMMEM_STORE) or hosts it on rank 0 at
//     SYMMEM_PORT (default MASTER_PORT+1): never on MASTER_PORT, which belongs
//     to torch's store (torchrun's agent, or init_process_group under
//     `symmem launch`). Under torchrun without SYMMEM_TOKEN the token derives
//     from TORCHELASTIC_RUN_ID and the master address: it separates jobs but
//     is no secret (see the trust model in docs/cli.md);
//   - FDExchange, which passes file descriptors between the ranks of one host
//     over Unix-domain sockets (SCM_RIGHTS), checking the peer's uid and token.
//
// The store speaks a small length-prefixed binary protocol (see wire.go). Every
// connection first presents the job token; a wrong token is refused. Every
// blocking call has a deadline: the caller's ctx deadline, or DefaultCallTimeout.
package rendezvous
