package compute

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
)

// ErrPluginInit: opening the plugin ran its init functions and one of them
// panicked (or the process checking it died, or init did not return within
// PluginCheckTimeout). The plugin is not loaded; the old version, if any,
// keeps running.
var ErrPluginInit = errors.New("plugin init failed")

// PluginCheckTimeout bounds the child process that opens a plugin before
// this process does (see ServePluginCheck): an init that never returns
// fails the load after it.
var PluginCheckTimeout = 30 * time.Second

// pluginCheckEnv names the plugin a child started by checkPluginInChild
// opens; ServePluginCheck acts on it.
const pluginCheckEnv = "SLUICE_PLUGIN_CHECK"

// exit codes of the check child.
const (
	checkOK        = 0
	checkInitPanic = 3
)

// pluginCheckExe is the executable that serves plugin checks (this one,
// once ServePluginCheck has run); empty: plugins are opened in-process
// only, with a recover around their init.
var pluginCheckExe atomic.Pointer[string]

// ServePluginCheck is called first thing in main (and in TestMain of test
// binaries that open plugins). In a process started to check a plugin it
// opens that plugin, reports on stderr and exits: 0 when the plugin opened
// (or failed to open with an ordinary error, which the parent will meet
// again safely), 3 when its init panicked. In any other process it records
// that this executable can serve such checks, so that every later plugin
// load first opens the plugin in a child (see docs/compute.md: a panic in a
// plugin's init cannot be fully recovered in-process).
func ServePluginCheck() {
	path := os.Getenv(pluginCheckEnv)
	if path == "" {
		if exe, err := os.Executable(); err == nil {
			pluginCheckExe.Store(&exe)
		}
		return
	}
	if _, err := openRecovered(path); errors.Is(err, ErrPluginInit) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(checkInitPanic)
	}
	os.Exit(checkOK)
}

// openRecovered opens the plugin with the registered PluginOpener, with a
// recover around the plugin's init functions: a panic becomes an error
// wrapping ErrPluginInit, with the panic value and where it was raised on
// one line.
func openRecovered(path string) (lookup func(string) (any, error), err error) {
	open := pluginOpener.Load()
	if open == nil {
		return nil, fmt.Errorf("plugin %s: %w", path, ErrNoPlugins)
	}
	defer func() {
		if r := recover(); r != nil {
			lookup, err = nil, fmt.Errorf("plugin %s: %w: init panicked: %v%s", path, ErrPluginInit, r, panicSite())
		}
	}()
	return (*open)(path)
}

// panicSite is " (at file:line in func)" of the frame that panicked, for a
// deferred recover; "" if not found.
func panicSite() string {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if f.Function != "" && !strings.HasPrefix(f.Function, "runtime.") {
			return fmt.Sprintf(" (at %s:%d in %s)", f.File, f.Line, f.Function)
		}
		if !more {
			return ""
		}
	}
}

// checkPluginInChild opens the plugin at path in a child process of this
// executable first, when it serves checks: whatever its init does (panic,
// crash from a goroutine, exit, endless loop) happens to the child, and the
// load fails with the child's report instead of taking this process down or
// leaving Go's plugin table in a state no later open can recover from.
func checkPluginInChild(path string) error {
	exe := pluginCheckExe.Load()
	if exe == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), PluginCheckTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, *exe)
	cmd.Env = append(os.Environ(), pluginCheckEnv+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{w: &stderr, n: 64 << 10}
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("plugin %s: %w: opening it did not return within %v (an init function that never returns?)", path, ErrPluginInit, PluginCheckTimeout)
	}
	report := strings.TrimSpace(stderr.String())
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == checkInitPanic {
		// The child's one-line report already names the plugin.
		msg := strings.TrimPrefix(firstLine(report), "plugin "+path+": ")
		msg = strings.TrimPrefix(msg, ErrPluginInit.Error()+": ")
		return fmt.Errorf("plugin %s: %w: %s", path, ErrPluginInit, msg)
	}
	// The child died some other way: a goroutine of init panicked, init
	// called os.Exit, a signal. Go's crash report starts with the reason.
	return fmt.Errorf("plugin %s: %w: the process opening it died (%v): %s", path, ErrPluginInit, err, firstLine(report))
}

// firstLine is s up to its first line break, for one-line reports.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// limitedWriter keeps the first n bytes written and drops the rest.
type limitedWriter struct {
	w *bytes.Buffer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
