// Package plugbuild builds real Go plugins for tests and benchmarks with the
// same toolchain and build flags as the running binary, which Go's plugin
// loader requires (a test binary built with -race needs -race plugins).
package plugbuild

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/testenv"
)

// Flags returns the build flags of the running binary that must match in a
// plugin: -race, -msan, -asan, -trimpath, -gcflags and -tags, read from the
// binary's build information.
func Flags() []string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	var flags []string
	for _, s := range bi.Settings {
		switch s.Key {
		case "-race", "-msan", "-asan", "-trimpath":
			if s.Value == "true" {
				flags = append(flags, s.Key)
			}
		case "-gcflags", "-tags":
			flags = append(flags, s.Key+"="+s.Value)
		}
	}
	return flags
}

// ErrUnavailable is wrapped by Check when plugins cannot be built here.
var ErrUnavailable = errors.New("go plugins cannot be built here")

// Check returns the go command if plugins can be built here: a supported OS,
// cgo on, a C compiler and a go command of the running binary's version.
func Check() (string, error) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" && runtime.GOOS != "freebsd" {
		return "", fmt.Errorf("%w: not supported on %s", ErrUnavailable, runtime.GOOS)
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("%w: no go command in PATH", ErrUnavailable)
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return "", fmt.Errorf("%w: they need cgo and a C compiler; %s not found (apt-get install gcc)", ErrUnavailable, cc)
	}
	out, err := exec.Command(goCmd, "env", "GOVERSION", "CGO_ENABLED").Output()
	if err != nil {
		return "", fmt.Errorf("%w: go env: %v", ErrUnavailable, err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 || f[0] != runtime.Version() {
		return "", fmt.Errorf("%w: go command is %v, this binary was built by %s", ErrUnavailable, f, runtime.Version())
	}
	if f[1] != "1" {
		return "", fmt.Errorf("%w: CGO_ENABLED=0", ErrUnavailable)
	}
	return goCmd, nil
}

// BuildFile writes goSource as main.go in a fresh directory under dir and
// builds it into dir/name with -buildmode=plugin, the running binary's Flags
// and extra flags. Every distinct source gets its own plugin path (the file,
// not a package, is built), so several load into one process.
func BuildFile(dir, name, goSource string, extra ...string) (string, error) {
	goCmd, err := Check()
	if err != nil {
		return "", err
	}
	src, err := os.MkdirTemp(dir, "src-")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(goSource), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module plugsrc\n\ngo 1.21\n"), 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	args := append([]string{"build", "-buildmode=plugin"}, Flags()...)
	args = append(args, extra...)
	args = append(args, "-o", out, "main.go")
	cmd := exec.Command(goCmd, args...)
	cmd.Dir = src
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return out, nil
}

// Build is BuildFile for tests: when plugins cannot be built here (no C
// compiler, cgo off) it fails tb under CI and skips it otherwise
// (testenv.Missing), and it fails tb when the build fails.
func Build(tb testing.TB, dir, name, goSource string, extra ...string) string {
	tb.Helper()
	out, err := BuildFile(dir, name, goSource, extra...)
	if errors.Is(err, ErrUnavailable) {
		testenv.Require(tb, err) // fails under CI=true, skips otherwise
	}
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
