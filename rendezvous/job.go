package rendezvous

import (
	"context"
	"fmt"
)

// jobKey holds the id of the job a store serves: the first rank to connect
// sets it.
const jobKey = "symmem/job-id"

// checkJob fails when the store already serves another job id: a rank whose
// token matches but whose SYMMEM_JOB_ID differs would otherwise wait for
// peers under keys no one writes, and fail only at the timeout with words
// about ranks that "never arrived".
func checkJob(ctx context.Context, c *Client, e Env) error {
	cur, _, err := c.CompareSet(ctx, jobKey, nil, []byte(e.JobID))
	if err != nil {
		return fmt.Errorf("recording the job id in the store: %w", err)
	}
	if string(cur) != e.JobID {
		return fmt.Errorf("%w: the store at %s serves job %q but this rank (%d) has %s=%q: the token matches, so it is the right store, but every rank of one job needs the same %s (the launcher sets it; with torchrun set it alike on every rank or on none)",
			ErrBadEnv, e.SymmemStore(), cur, e.Rank, VarJobID, e.JobID, VarJobID)
	}
	return nil
}
