package redisproc

import (
	"os"
	"os/exec"
	"testing"
)

// Need is for tests that start a redis-server: without one on PATH they
// skip, except when the CI environment variable is set, where they fail
// (scripts/test installs it, so a missing server there is a broken set-up,
// not a reason to pass).
func Need(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server not installed, and CI is set (scripts/test installs it)")
		}
		t.Skip("redis-server not installed (scripts/test installs it)")
	}
}
