package luavm

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind (a
// watchdog not stopped, a waiter never woken).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
