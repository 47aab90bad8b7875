// Package poolbench is the benchmark grid of the Lua VM pool: the published
// report's script run through every luavm strategy and through the simple
// pools the issue compares against (sync.Pool, a channel of VMs, gopher-lua's
// README pool, the report's close-after-use non-core pool, no pool), at a
// given number of goroutines. `sluice bench pool` runs each cell in a child
// process; `go test -bench` runs the same bodies.
package poolbench

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"

	"github.com/sluicedb/sluice/luavm"
)

// Script is the report's script; goSayHello is a Go function that does
// nothing, so the figures are the pool's and not a printer's.
const Script = `
function helloLua(n)
  goSayHello("hello", "my name is lua") -- calls Go
  return n, 100000
end
`

// ScriptName is what the report called it.
const ScriptName = "test.lua"

func goSayHello(L *lua.LState) int { return 0 }

// Strategies of the grid: the report's rows, our default, the degenerate
// case the issue names, and the simple baseline pools (prefixed "simple-").
var Strategies = []string{
	"none", "variable",
	"core1000+unlimited", "core2000+unlimited",
	"core1000+block", "core2000+block",
	"core1000+max2000+block",
	"core2+unlimited",
	"default",
}

// Baselines are pools written the simple ways, for comparison.
var Baselines = []string{
	"simple-syncpool", "simple-readme", "simple-chan1000", "simple-chan2", "simple-core2+close",
}

// Mode selects what one benchmark operation does.
type Mode string

const (
	// ModeHot: Do + Func + Call1, no []any: the zero-allocation path.
	ModeHot Mode = "hot"
	// ModeReport: InvokeScriptFunc("test.lua", "helloLua", 30s, 2, 1), the
	// report's call, returning []any.
	ModeReport Mode = "report"
)

// Bench returns the benchmark of strategy at goroutines concurrent callers
// (SetParallelism(goroutines / GOMAXPROCS), at least 1 per P).
func Bench(strategy string, mode Mode, goroutines int) (func(b *testing.B), error) {
	if strings.HasPrefix(strategy, "simple-") {
		return baseline(strategy, goroutines)
	}
	cfg, err := luavm.ParsePool(strategy)
	if err != nil {
		return nil, err
	}
	return func(b *testing.B) {
		m := luavm.NewManager(luavm.Options{})
		defer m.Close()
		m.Register("goSayHello", goSayHello)
		if err := m.Load(ScriptName, Script, luavm.ScriptConfig{Pool: cfg, Timeout: 30 * time.Second}); err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		setParallelism(b, goroutines)
		defer func() {
			if st := m.Stats(); len(st) == 1 {
				b.ReportMetric(float64(st[0].Waits)/float64(b.N), "waits/op")
				b.ReportMetric(float64(st[0].VMsCreated), "vms")
				b.ReportMetric(float64(st[0].PoolLocks)/float64(b.N), "locks/op")
			}
		}()
		defer reportCPU(b)()
		switch mode {
		case ModeReport:
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					res, err := m.InvokeScriptFunc(ScriptName, "helloLua", 30*time.Second, 2, 1)
					if err != nil || len(res) != 2 {
						panic(fmt.Sprint(res, err))
					}
				}
			})
		default:
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					err := m.Do(ctx, ScriptName, func(vm *luavm.VM) error {
						fn, err := vm.Func("helloLua")
						if err != nil {
							return err
						}
						_, err = vm.Call1(fn, lua.LNumber(1))
						return err
					})
					if err != nil {
						panic(err)
					}
				}
			})
		}
	}, nil
}

// reportCPU resets the timer and returns a func that reports the process's
// CPU time per op (all threads) as cpu-ns/op: on a shared machine it moves
// far less than ns/op.
func reportCPU(b *testing.B) func() {
	b.ResetTimer()
	t0 := selfCPU()
	return func() {
		d := selfCPU() - t0
		b.StopTimer()
		b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func setParallelism(b *testing.B, goroutines int) {
	p := goroutines / runtime.GOMAXPROCS(0)
	if p < 1 {
		p = 1
	}
	b.SetParallelism(p)
}

// compiled is the report's script compiled once for the baseline pools.
var compiled = sync.OnceValue(func() *lua.FunctionProto {
	chunk, err := parse.Parse(strings.NewReader(Script), ScriptName)
	if err != nil {
		panic(err)
	}
	proto, err := lua.Compile(chunk, ScriptName)
	if err != nil {
		panic(err)
	}
	return proto
})

// newState is the report's VM configuration with the script loaded.
func newState() *lua.LState {
	L := lua.NewState(lua.Options{CallStackSize: 32, MinimizeStackMemory: true})
	L.SetGlobal("goSayHello", L.NewFunction(goSayHello))
	L.Push(L.NewFunctionFromProto(compiled()))
	if err := L.PCall(0, 0, nil); err != nil {
		panic(err)
	}
	return L
}

// callHello is the report's call on a bare state, written the way the
// simple pools of the issue were measured: no per-call context (so no time
// limit; BenchmarkTimeouts in luavm measures what a per-call context adds),
// the function looked up by name each call.
func callHello(L *lua.LState) {
	L.Push(L.GetGlobal("helloLua"))
	L.Push(lua.LNumber(1))
	if err := L.PCall(1, 2, nil); err != nil {
		panic(err)
	}
	L.Pop(2)
}

// readmePool is the pool of gopher-lua's README: a mutex and a slice that
// grows without a bound.
type readmePool struct {
	mu    sync.Mutex
	saved []*lua.LState
}

func (p *readmePool) Get() *lua.LState {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.saved)
	if n == 0 {
		return newState()
	}
	x := p.saved[n-1]
	p.saved = p.saved[:n-1]
	return x
}

func (p *readmePool) Put(L *lua.LState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.saved = append(p.saved, L)
}

// closingPool is the report's "core N + unlimited non-core": N resident VMs
// in a channel; when none is free a new VM is made and closed after use.
type closingPool struct{ core chan *lua.LState }

func (p *closingPool) Get() (*lua.LState, bool) {
	select {
	case L := <-p.core:
		return L, true
	default:
		return newState(), false
	}
}

func (p *closingPool) Put(L *lua.LState, core bool) {
	if core {
		p.core <- L
		return
	}
	L.Close()
}

func baseline(name string, goroutines int) (func(b *testing.B), error) {
	var body func(pb *testing.PB)
	var cleanup func()
	switch {
	case name == "simple-syncpool":
		var sp sync.Pool
		sp.New = func() any { return newState() }
		body = func(pb *testing.PB) {
			for pb.Next() {
				L := sp.Get().(*lua.LState)
				callHello(L)
				sp.Put(L)
			}
		}
	case name == "simple-readme":
		p := &readmePool{}
		body = func(pb *testing.PB) {
			for pb.Next() {
				L := p.Get()
				callHello(L)
				p.Put(L)
			}
		}
	case strings.HasPrefix(name, "simple-chan"):
		var n int
		if _, err := fmt.Sscanf(name, "simple-chan%d", &n); err != nil || n < 1 {
			return nil, fmt.Errorf("poolbench: baseline %q: want simple-chan<N>", name)
		}
		ch := make(chan *lua.LState, n)
		for range n {
			ch <- newState()
		}
		body = func(pb *testing.PB) {
			for pb.Next() {
				L := <-ch
				callHello(L)
				ch <- L
			}
		}
	case strings.HasPrefix(name, "simple-core") && strings.HasSuffix(name, "+close"):
		var n int
		if _, err := fmt.Sscanf(name, "simple-core%d+close", &n); err != nil || n < 1 {
			return nil, fmt.Errorf("poolbench: baseline %q: want simple-core<N>+close", name)
		}
		p := &closingPool{core: make(chan *lua.LState, n)}
		for range n {
			p.core <- newState()
		}
		body = func(pb *testing.PB) {
			for pb.Next() {
				L, core := p.Get()
				callHello(L)
				p.Put(L, core)
			}
		}
	default:
		return nil, fmt.Errorf("poolbench: unknown baseline %q (have %s)", name, strings.Join(Baselines, ", "))
	}
	return func(b *testing.B) {
		if cleanup != nil {
			defer cleanup()
		}
		b.ReportAllocs()
		setParallelism(b, goroutines)
		defer reportCPU(b)()
		b.RunParallel(body)
	}, nil
}
