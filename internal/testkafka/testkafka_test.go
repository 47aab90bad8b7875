package testkafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestStartDoesNotInstall: with Kafka missing from the cache directory,
// Start fails at once with ErrNotInstalled and leaves the cache directory
// as it was: installing is scripts/test's job, never a test's.
func TestStartDoesNotInstall(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("SLUICE_CACHE_DIR", cache)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	b, err := Start(ctx, filepath.Join(t.TempDir(), "broker"), 1)
	if b != nil {
		b.Kill()
	}
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Start without Kafka installed: %v, want ErrNotInstalled", err)
	}
	if !strings.Contains(err.Error(), "scripts/test installs it") {
		t.Errorf("error %q does not say what installs Kafka", err)
	}
	entries, _ := os.ReadDir(cache)
	if len(entries) > 0 {
		t.Errorf("Start wrote %d entries into the cache directory (an install from a test): %v", len(entries), entries)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Start took %v to find Kafka missing", d)
	}
}

// fakeTB records what Require does; Fatalf and Skipf end the goroutine
// as testing.T's do.
type fakeTB struct{ fatal, skip string }

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestRequireMissing: a missing broker fails the test under CI=true and
// skips it otherwise, each time with a message naming the cause.
func TestRequireMissing(t *testing.T) {
	savedB, savedErr := shared.b, shared.err
	defer func() { shared.b, shared.err = savedB, savedErr }()
	shared.b, shared.err = nil, ErrNotInstalled
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		var f fakeTB
		done := make(chan struct{})
		go func() { defer close(done); Require(&f) }()
		<-done
		if ci != "" && (f.fatal == "" || f.skip != "" || !strings.Contains(f.fatal, "not installed")) {
			t.Errorf("CI=%q: fatal %q, skip %q: want a failure naming the cause", ci, f.fatal, f.skip)
		}
		if ci == "" && (f.skip == "" || f.fatal != "" || !strings.Contains(f.skip, "CI=true")) {
			t.Errorf("CI unset: fatal %q, skip %q: want a skip that says CI=true fails", f.fatal, f.skip)
		}
	}
}
