// Package plantest checks the plans of package plan by running them: Simulate
// executes the n plans of a group against in-memory buffers for several
// calls in random interleavings, honouring waits and epochs, and reports
// unordered accesses to a peer's buffer (ErrRace) and deadlocks
// (ErrDeadlock). It is for tests (plan's builders are proved with it here);
// no production code imports it.
package plantest
