package redisproc

import (
	"testing"

	"github.com/sluicedb/sluice/internal/testenv"
)

// Need is for tests that start a redis-server: without one on PATH they
// skip, except when CI is set, where they fail (scripts/test installs it, so
// a missing server there is a broken set-up, not a reason to pass).
func Need(t testing.TB) {
	t.Helper()
	testenv.Command(t, "redis-server", "scripts/test installs it: apt-get install redis-server")
}
