package compute

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// PluginFunc is the signature a plugin's exported function must have.
type PluginFunc = func(map[string]interface{}) (interface{}, error)

// Plugin errors, checked with errors.Is.
var (
	// ErrPluginReload: the plugin file at a path already opened in this
	// process changed. Go cannot unload a plugin nor load a second one from
	// the same path, so the old version keeps running; ship every build under
	// a new path (see docs/compute.md).
	ErrPluginReload = errors.New("plugin changed at a path already loaded: Go cannot reload a plugin; the old version keeps running; ship the new build under a new path")
	// ErrPluginAlreadyLoaded: a plugin with the same plugin path (Go package
	// identity) is already loaded, e.g. a new build of the same package.
	ErrPluginAlreadyLoaded = errors.New("a plugin built from the same package is already loaded; build each version from files (go build -buildmode=plugin -o f-v2.so f.go); a new build of an unchanged package path cannot be loaded into a running process")
	// ErrPluginMismatch: the plugin was built by another Go version or with
	// other build flags (-race, -trimpath, ...) than this binary.
	ErrPluginMismatch = errors.New("plugin was built by another Go toolchain or with other build flags than sluice; rebuild it with the same Go version and flags")
	// ErrPluginPanic: the plugin function panicked; the panic was recovered.
	ErrPluginPanic = errors.New("plugin panicked")
	// ErrNoPlugins: this binary was built without Go plugin loading (no
	// EnablePlugins in its main).
	ErrNoPlugins = errors.New("this binary cannot load Go plugins: it is built without package plugin")
)

// PluginOpener opens the Go plugin at path and returns the lookup of its
// exported symbols: goplugin.Open, which is plugin.Open.
//
// compute does not import package plugin itself: a binary that links it
// exports every symbol and keeps every exported method, which made the lean
// sluice binary 2.5 times as large and start with 13 MB more resident
// (docs/architecture.md). Only the binaries that load plugins link it, by
// calling EnablePlugins(goplugin.Open) first thing in main.
type PluginOpener func(path string) (lookup func(symbol string) (any, error), err error)

// pluginOpener is what EnablePlugins registered; nil: ErrNoPlugins.
var pluginOpener atomic.Pointer[PluginOpener]

// EnablePlugins lets this process load Go plugins with open
// (goplugin.Open). Without it a plugin column fails with ErrNoPlugins.
func EnablePlugins(open PluginOpener) { pluginOpener.Store(&open) }

// openedPlugins records every plugin opened by this process, by absolute
// path, with the hash of the file that was opened. It is process-wide
// because Go's plugin table is.
var openedPlugins = struct {
	sync.Mutex
	byPath map[string]openedPlugin // guarded by the mutex
}{byPath: map[string]openedPlugin{}}

type openedPlugin struct {
	hash   [32]byte
	lookup func(symbol string) (any, error)
	// err is why opening failed after Go registered the plugin (its init
	// panicked): Go's plugin table then holds an entry that never finishes
	// loading, and a second plugin.Open of the path would block forever.
	err error
}

// Plugin is the loader of Go plugins (.so files built with
// go build -buildmode=plugin) exporting FuncName with the PluginFunc
// signature. Calls recover panics.
type Plugin struct {
	FuncName string
	path     string
	fn       PluginFunc
}

// NewPlugin returns the unloaded plugin loader calling funcName.
func NewPlugin(funcName string) *Plugin { return &Plugin{FuncName: funcName} }

// Load opens the plugin at path (a plain path or file:// URI) and looks up
// FuncName.
func (p *Plugin) Load(path string) (Handler, error) {
	if strings.HasPrefix(strings.ToLower(path), "file://") {
		src, err := ResolveSource(path)
		if err != nil {
			return nil, err
		}
		path = src.Path
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", path, err)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", path, err)
	}
	return p.open(abs, sha256.Sum256(data))
}

func (p *Plugin) open(abs string, hash [32]byte) (Handler, error) {
	if p.FuncName == "" {
		return nil, fmt.Errorf("plugin %s: funcname is empty (name the exported function)", abs)
	}
	openedPlugins.Lock()
	defer openedPlugins.Unlock()
	op, seen := openedPlugins.byPath[abs]
	if seen && op.hash != hash {
		return nil, fmt.Errorf("plugin %s: %w", abs, ErrPluginReload)
	}
	if seen && op.err != nil {
		return nil, op.err
	}
	if !seen {
		if pluginOpener.Load() == nil {
			return nil, fmt.Errorf("plugin %s: %w", abs, ErrNoPlugins)
		}
		if err := checkPluginInChild(abs); err != nil {
			return nil, err
		}
		lookup, err := openRecovered(abs)
		if errors.Is(err, ErrPluginInit) {
			openedPlugins.byPath[abs] = openedPlugin{hash: hash, err: err}
			return nil, err
		}
		if err != nil {
			msg := err.Error()
			switch {
			case strings.Contains(msg, "plugin already loaded"):
				return nil, fmt.Errorf("plugin %s: %w (%v)", abs, ErrPluginAlreadyLoaded, err)
			case strings.Contains(msg, "different version of package"):
				return nil, fmt.Errorf("plugin %s: %w (%v)", abs, ErrPluginMismatch, err)
			}
			return nil, fmt.Errorf("plugin %s: %w", abs, err)
		}
		op = openedPlugin{hash: hash, lookup: lookup}
		openedPlugins.byPath[abs] = op
	}
	sym, err := op.lookup(p.FuncName)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: symbol %q not found: %w", abs, p.FuncName, err)
	}
	var fn PluginFunc
	switch f := sym.(type) {
	case PluginFunc:
		fn = f
	case *PluginFunc: // an exported variable holding the function
		fn = *f
	default:
		return nil, fmt.Errorf("plugin %s: symbol %q has type %T, want func(map[string]interface{}) (interface{}, error)", abs, p.FuncName, sym)
	}
	if fn == nil {
		return nil, fmt.Errorf("plugin %s: symbol %q is a nil function", abs, p.FuncName)
	}
	return &Plugin{FuncName: p.FuncName, path: abs, fn: fn}, nil
}

func (*Plugin) String() string { return "plugin" }

// Value calls the plugin function. A panic is recovered and returned as an
// error wrapping ErrPluginPanic with the panic value and where it was raised,
// on one line (a stack trace broke the stats table and log lines).
func (p *Plugin) Value(row map[string]any) (v any, err error) {
	if p.fn == nil {
		return nil, errors.New("plugin: not loaded")
	}
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("%w: %v%s", ErrPluginPanic, r, panicSite())
		}
	}()
	return p.fn(row)
}
