// Package testenv decides what a test does when a real server or tool it
// needs (redis-server, a C compiler for Go plugins, PostgreSQL...) is not
// installed: under CI it fails, because scripts/test installs everything and
// a missing part there is a broken set-up that must not pass as a skip;
// elsewhere it skips, saying what is missing and how to get it.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
)

// TB is the part of testing.TB this package uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// InCI reports whether the CI environment variable is set to a true value:
// "true", "1" and any value strconv.ParseBool does not read as false (CI
// systems set "true"; an empty, "false" or "0" value is not CI).
func InCI() bool {
	v := os.Getenv("CI")
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err != nil || b
}

// Missing fails t under CI and skips it otherwise, with the reason given
// by format and args (what is missing and how to install it).
func Missing(t TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("%s; CI is set, so a missing dependency fails the test instead of skipping it", why)
		return
	}
	t.Skipf("skipped: %s (with CI=true this fails)", why)
}

// Require is Missing when err is not nil: err says what is missing.
func Require(t TB, err error) {
	t.Helper()
	if err != nil {
		Missing(t, "%v", err)
	}
}

// Command returns the path of the named program on PATH, failing t under
// CI and skipping it otherwise when there is none; install says how to get
// it (e.g. "scripts/test installs it").
func Command(t TB, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "%s not found on PATH (%s)", name, install)
	}
	return path
}
