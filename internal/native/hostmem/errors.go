package hostmem

import (
	"fmt"
	"os"
)

// ErrTimeout is returned (wrapped) by FutexWait when the timeout passes. It
// wraps os.ErrDeadlineExceeded, so errors.Is(err, os.ErrDeadlineExceeded)
// also holds.
var ErrTimeout = fmt.Errorf("hostmem: futex wait timed out: %w", os.ErrDeadlineExceeded)
