// Package rendezvous owns how the ranks of one job find each other:
//
//   - a token-guarded TCP key-value store (Server, Client) with set, get, add,
//     compare-set, blocking wait and delete, plus a Barrier built on them;
//   - the torchrun-compatible environment (Env, EnvFromOS) and Bootstrap, which
//     dials the launcher's store or hosts it on rank 0;
//   - FDExchange, which passes file descriptors between the ranks of one host
//     over Unix-domain sockets (SCM_RIGHTS), checking the peer's uid and token.
//
// The store speaks a small length-prefixed binary protocol (see wire.go). Every
// connection first presents the job token; a wrong token is refused. Every
// blocking call has a deadline: the caller's ctx deadline, or DefaultTimeout.
package rendezvous
