//go:build !unix

package rdbtool

import "time"

// threadCPU reports nothing where the thread's CPU clock is not available:
// Options.StageCPU then reads zero.
func threadCPU() time.Duration { return 0 }
