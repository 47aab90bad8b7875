package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a TB that records whether Missing failed or skipped.
type recorder struct {
	failed, skipped string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }
func (r *recorder) Skipf(format string, args ...any)  { r.skipped = fmt.Sprintf(format, args...) }

func TestInCI(t *testing.T) {
	for v, want := range map[string]bool{"": false, "true": true, "1": true, "yes": true, "false": false, "0": false} {
		t.Setenv("CI", v)
		if got := InCI(); got != want {
			t.Errorf("CI=%q: InCI() = %v, want %v", v, got, want)
		}
	}
}

func TestMissingFailsUnderCIAndSkipsOtherwise(t *testing.T) {
	t.Setenv("CI", "true")
	var r recorder
	Command(&r, "sluice-no-such-program", "nothing installs it")
	if r.failed == "" || r.skipped != "" || !strings.Contains(r.failed, "sluice-no-such-program not found on PATH (nothing installs it)") {
		t.Errorf("under CI=true: failed %q, skipped %q; want a failure naming the program", r.failed, r.skipped)
	}

	t.Setenv("CI", "")
	r = recorder{}
	Command(&r, "sluice-no-such-program", "nothing installs it")
	if r.skipped == "" || r.failed != "" || !strings.Contains(r.skipped, "sluice-no-such-program") {
		t.Errorf("without CI: failed %q, skipped %q; want a skip naming the program", r.failed, r.skipped)
	}

	r = recorder{}
	if Command(&r, "go", "the Go toolchain"); r.failed != "" || r.skipped != "" {
		t.Errorf("go is on PATH: failed %q, skipped %q", r.failed, r.skipped)
	}
	Require(&r, nil)
	if r.failed != "" || r.skipped != "" {
		t.Errorf("Require(nil): failed %q, skipped %q", r.failed, r.skipped)
	}
}
