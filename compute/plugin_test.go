package compute

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/compute/plugbuild"
)

func TestPluginLoadAndCall(t *testing.T) {
	path := testPluginPath(t)
	h, err := NewPlugin("Upper").Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if h.String() != "plugin" {
		t.Errorf("String() = %q", h.String())
	}
	if v, err := h.Value(map[string]any{"name": "ada"}); v != "ADA" || err != nil {
		t.Errorf("Upper = %v, %v", v, err)
	}
	if _, err := h.Value(map[string]any{"name": 1}); err == nil || !strings.Contains(err.Error(), "not a string") {
		t.Errorf("Upper error = %v", err)
	}
	// file:// URIs and exported variables work too.
	h, err = NewPlugin("Var").Load("file://" + path)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := h.Value(nil); v != "from a var" || err != nil {
		t.Errorf("Var = %v, %v", v, err)
	}
}

func TestPluginBadSymbols(t *testing.T) {
	path := testPluginPath(t)
	f := func(sym, want string) {
		t.Helper()
		_, err := NewPlugin(sym).Load(path)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Errorf("Load(%s) err = %v; want it to contain %q and the path", sym, err, want)
		}
	}
	f("Missing", `symbol "Missing" not found`)
	f("OtherSignature", `has type func(string) string, want func(map[string]interface{}) (interface{}, error)`)
	f("NilFunc", "nil function")
	f("", "funcname is empty")
	if _, err := NewPlugin("X").Load(filepath.Join(t.TempDir(), "none.so")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file err = %v", err)
	}
}

func TestPluginPanicRecovered(t *testing.T) {
	h, err := NewPlugin("Panics").Load(testPluginPath(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Value(map[string]any{})
	if !errors.Is(err, ErrPluginPanic) || !strings.Contains(err.Error(), "assignment to entry in nil map") {
		t.Errorf("err = %v", err)
	}
	// One line, with where it panicked: a stack trace broke the stats table.
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "main.go:") {
		t.Errorf("err = %q; want one line naming the plugin's source line", msg)
	}
}

// TestPluginWrongResultType: the value is checked against the column type
// in the processor and the batch goes on.
func TestPluginWrongResultType(t *testing.T) {
	path := testPluginPath(t)
	p, err := New(context.Background(), Config{Computed: []ColumnConfig{
		{Script: ScriptConfig{Name: "bad", Func: path, FuncName: "WrongType"}, Type: "string"},
		{Script: ScriptConfig{Name: "boom", Func: path, FuncName: "Panics"}, Type: "string"},
		{Script: ScriptConfig{Name: "n", Func: path, FuncName: "Len"}, Type: "int64"},
	}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	b, err := p.Process(context.Background(), []map[string]any{{"a": int64(1)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Rows) != 1 || len(b.Errors) != 2 {
		t.Fatalf("rows %v errors %v", b.Rows, b.Errors)
	}
	if e := b.Errors[0]; !errors.Is(e, ErrType) || e.Column != "bad" || e.Loader != "plugin" || !strings.Contains(e.Error(), `column "bad" (plugin `) || !strings.Contains(e.Error(), "struct { X int } cannot be a string column") {
		t.Errorf("errors[0] = %v", e)
	}
	if e := b.Errors[1]; !errors.Is(e, ErrPluginPanic) || e.Column != "boom" {
		t.Errorf("errors[1] = %v", e)
	}
	// null policy: both columns null, the next column still computed (it
	// sees the nulls: a, bad, boom = 3 fields).
	r := b.Rows[0]
	if v, ok := r["bad"]; !ok || v != nil {
		t.Errorf("bad = %v, %v", v, ok)
	}
	if r["n"] != int64(3) {
		t.Errorf("n = %#v", r["n"])
	}
}

// TestPluginSamePathReload: Go cannot reload a plugin at a path: a changed
// file is detected and reported, the old version keeps running.
func TestPluginSamePathReload(t *testing.T) {
	dir := t.TempDir()
	v1 := plugbuild.Build(t, dir, "ver.so", `package main
func Version(map[string]interface{}) (interface{}, error) { return "v1", nil }
`)
	p, err := New(context.Background(), Config{Computed: []ColumnConfig{{Script: ScriptConfig{Name: "v", Func: v1, FuncName: "Version"}, Type: "string"}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// A new build replaces the file at the same path.
	v2 := plugbuild.Build(t, t.TempDir(), "ver.so", `package main
func Version(map[string]interface{}) (interface{}, error) { return "v2", nil }
`)
	data, err := os.ReadFile(v2)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(v1+".tmp", data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(v1+".tmp", v1); err != nil {
		t.Fatal(err)
	}
	err = p.Reload(context.Background())
	var e *Error
	if !errors.Is(err, ErrPluginReload) || !errors.As(err, &e) || e.Column != "v" || e.Loader != "plugin" {
		t.Fatalf("Reload err = %v", err)
	}
	b, err := p.Process(context.Background(), []map[string]any{{}})
	if err != nil || b.Rows[0]["v"] != "v1" {
		t.Errorf("after a failed reload v = %v, %v; want the old v1", b.Rows, err)
	}
	if s := p.Stats()[0]; s.ReloadErrors != 1 || !strings.Contains(s.LastError, "cannot reload") {
		t.Errorf("stats %+v", s)
	}
	// Reported once, not at every poll.
	if err := p.Reload(context.Background()); err != nil {
		t.Errorf("second Reload = %v", err)
	}
	// The documented way: the new build under a new path loads.
	h, err := NewPlugin("Version").Load(v2)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := h.Value(nil); v != "v2" {
		t.Errorf("new path gives %v", v)
	}
}

// TestPluginOtherToolchain simulates a plugin built by another Go toolchain:
// other build flags (-trimpath toggled) give "plugin was built with a
// different version of package"; the error names column and loader.
func TestPluginOtherToolchain(t *testing.T) {
	flag := "-trimpath"
	for _, f := range plugbuild.Flags() {
		if f == "-trimpath" {
			t.Skip("test binary built with -trimpath; cannot toggle it")
		}
	}
	path := plugbuild.Build(t, t.TempDir(), "other.so", `package main
func Other(map[string]interface{}) (interface{}, error) { return "x", nil }
`, flag)
	_, err := New(context.Background(), Config{Computed: []ColumnConfig{{Script: ScriptConfig{Name: "o", Func: path, FuncName: "Other"}, Type: "string"}}}, Options{})
	var e *Error
	if !errors.Is(err, ErrPluginMismatch) || !errors.As(err, &e) || e.Column != "o" || e.Loader != "plugin" || !strings.Contains(err.Error(), "different version of package") {
		t.Fatalf("err = %v", err)
	}
}

// TestPluginOverHTTP: a plugin URL is downloaded under its content hash, so
// a new version gets a new path and is swapped in on re-poll.
func TestPluginOverHTTP(t *testing.T) {
	dir := t.TempDir()
	v1 := plugbuild.Build(t, dir, "h1.so", `package main
func HTTPVersion(map[string]interface{}) (interface{}, error) { return "h1", nil }
`)
	v2 := plugbuild.Build(t, dir, "h2.so", `package main
func HTTPVersion(map[string]interface{}) (interface{}, error) { return "h2", nil }
`)
	var mu sync.Mutex
	serving := v1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		path := serving
		mu.Unlock()
		http.ServeFile(w, r, path)
	}))
	defer srv.Close()
	cache := t.TempDir()
	p, err := New(context.Background(), Config{Computed: []ColumnConfig{{Script: ScriptConfig{Name: "v", Func: srv.URL + "/plugins/version.so", FuncName: "HTTPVersion"}, Type: "string"}}}, Options{HTTPClient: srv.Client(), PluginDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	value := func() any {
		b, err := p.Process(context.Background(), []map[string]any{{}})
		if err != nil || len(b.Errors) > 0 {
			t.Fatal(err, b.Errors)
		}
		return b.Rows[0]["v"]
	}
	if v := value(); v != "h1" {
		t.Fatalf("v = %v", v)
	}
	if err := p.Reload(context.Background()); err != nil || value() != "h1" {
		t.Fatalf("unchanged: %v", err)
	}
	// A new version is newer: give it an mtime past v1's (ServeFile's
	// Last-Modified has 1s granularity, and both were built within a second).
	if fi, err := os.Stat(v1); err == nil {
		later := fi.ModTime().Add(10 * time.Second)
		os.Chtimes(v2, later, later)
	}
	mu.Lock()
	serving = v2
	mu.Unlock()
	if err := p.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := value(); v != "h2" {
		t.Errorf("after re-poll v = %v", v)
	}
	files, _ := filepath.Glob(filepath.Join(cache, "*.so"))
	if len(files) != 2 {
		t.Errorf("cache holds %v, want one file per version", files)
	}
}

// TestConcurrentProcessAndReload: batches and reloads at once (run with
// -race); every batch sees one version.
func TestConcurrentProcessAndReload(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "v.lua")
	os.WriteFile(script, []byte("function main(row) return 'a' end"), 0o644)
	p, err := New(context.Background(), Config{Computed: []ColumnConfig{
		{Script: ScriptConfig{Name: "v", Func: script}, Type: "string"},
		{Script: ScriptConfig{Name: "w", Func: "make://identifier"}, Type: "string"},
	}}, Options{Lua: newManager(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				rows := make([]map[string]any, 64)
				for i := range rows {
					rows[i] = map[string]any{"i": int64(i)}
				}
				b, err := p.Process(context.Background(), rows)
				if err != nil || len(b.Errors) > 0 || len(b.Rows) != 64 {
					t.Error(err, b.Errors)
					return
				}
				for _, r := range b.Rows {
					if r["v"] != b.Rows[0]["v"] {
						t.Errorf("one batch saw two versions: %v and %v", b.Rows[0]["v"], r["v"])
						return
					}
				}
			}
		}()
	}
	for i := range 20 {
		os.WriteFile(script, []byte(fmt.Sprintf("function main(row) return 'v%d' end", i)), 0o644)
		if err := p.Reload(context.Background()); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
	if s := p.Stats()[0]; s.Reloads != 20 {
		t.Errorf("reloads %d", s.Reloads)
	}
}

// initPanicSource is a plugin whose init panics; tag makes each test's
// build a distinct plugin (Go loads one plugin path once per process).
func initPanicSource(tag string) string {
	return `package main

func init() { panic("boom in init ` + tag + `") }

func F(map[string]interface{}) (interface{}, error) { return "` + tag + `", nil }
`
}

// TestPluginInitPanic: a plugin whose init panics is a load error naming
// the plugin and the panic, on one line; loading it again fails the same way
// (Go's plugin.Open of it would block forever); other plugins still load.
// Unguarded, it crashed validate, compute and the server. Both ways are
// tested: in a check child (what sluice does) and in-process with a recover
// (for binaries that do not call ServePluginCheck).
func TestPluginInitPanic(t *testing.T) {
	for _, mode := range []string{"child", "in-process"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "in-process" {
				exe := pluginCheckExe.Swap(nil)
				t.Cleanup(func() { pluginCheckExe.Store(exe) })
			} else if pluginCheckExe.Load() == nil {
				t.Fatal("TestMain did not call ServePluginCheck")
			}
			path := plugbuild.Build(t, t.TempDir(), "initpanic.so", initPanicSource(mode))
			for range 2 {
				done := make(chan error, 1)
				go func() { _, err := NewPlugin("F").Load(path); done <- err }()
				var err error
				select {
				case err = <-done:
				case <-time.After(60 * time.Second):
					t.Fatal("Load of a plugin whose init panicked still running after 60s")
				}
				msg := fmt.Sprint(err)
				t.Log(msg)
				if !errors.Is(err, ErrPluginInit) || !strings.Contains(msg, path) || !strings.Contains(msg, "boom in init "+mode) || strings.Contains(msg, "\n") {
					t.Fatalf("err = %v; want one line wrapping ErrPluginInit with the path and the panic", err)
				}
			}
			h, err := NewPlugin("Upper").Load(testPluginPath(t))
			if err != nil {
				t.Fatal(err)
			}
			if v, err := h.Value(map[string]any{"name": "x"}); v != "X" || err != nil {
				t.Fatalf("another plugin after a failed one: %v, %v", v, err)
			}
		})
	}
}

// TestPluginInitExits: what no recover catches (init calling os.Exit here;
// likewise a goroutine of init that panics) happens to the check child, and
// the load fails with its report instead of ending this process.
func TestPluginInitExits(t *testing.T) {
	path := plugbuild.Build(t, t.TempDir(), "initexit.so", `package main

import (
	"fmt"
	"os"
)

func init() { fmt.Fprintln(os.Stderr, "init gives up"); os.Exit(7) }

func F(map[string]interface{}) (interface{}, error) { return nil, nil }
`)
	_, err := NewPlugin("F").Load(path)
	if !errors.Is(err, ErrPluginInit) || !strings.Contains(err.Error(), "exit status 7") || !strings.Contains(err.Error(), "init gives up") {
		t.Fatalf("err = %v", err)
	}
}

// TestPluginInitPanicOnReloadFromURL: a hot reload that downloads a plugin
// whose init panics is refused; the old version keeps running. Before issue
// 11 it killed the server.
func TestPluginInitPanicOnReloadFromURL(t *testing.T) {
	dir := t.TempDir()
	v1 := plugbuild.Build(t, dir, "r1.so", `package main
func F(map[string]interface{}) (interface{}, error) { return "r1", nil }
`)
	bad := plugbuild.Build(t, dir, "r2.so", initPanicSource("url"))
	var mu sync.Mutex
	serving := v1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		path := serving
		mu.Unlock()
		http.ServeFile(w, r, path)
	}))
	defer srv.Close()
	p, err := New(context.Background(), Config{Computed: []ColumnConfig{{Script: ScriptConfig{Name: "v", Func: srv.URL + "/f.so", FuncName: "F"}, Type: "string"}}}, Options{HTTPClient: srv.Client(), PluginDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if fi, err := os.Stat(v1); err == nil {
		later := fi.ModTime().Add(10 * time.Second)
		os.Chtimes(bad, later, later)
	}
	mu.Lock()
	serving = bad
	mu.Unlock()
	err = p.Reload(context.Background())
	var e *Error
	if !errors.Is(err, ErrPluginInit) || !errors.As(err, &e) || e.Column != "v" || !strings.Contains(err.Error(), "boom in init url") {
		t.Fatalf("Reload err = %v", err)
	}
	b, err := p.Process(context.Background(), []map[string]any{{}})
	if err != nil || b.Rows[0]["v"] != "r1" {
		t.Fatalf("after a refused reload: %v, %v; want the old r1", b.Rows, err)
	}
	if s := p.Stats()[0]; s.ReloadErrors != 1 || strings.Contains(s.LastError, "\n") {
		t.Errorf("stats %+v", s)
	}
}
