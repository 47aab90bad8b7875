package luavm

import (
	"context"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

const benchScript = `
function helloLua(n)
  goSayHello("hello", "my name is lua") -- calls Go
  return n, 100000
end
function loop(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
`

// threadCPU is the CPU time of the calling OS thread. The single-goroutine
// benchmarks lock their thread and report cpu-ns/op from it, a figure that
// other processes on a shared machine do not inflate as they do wall time.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU is the CPU time of the whole process (all threads), for the
// parallel benchmarks: wall time on a shared machine says little.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuTimer reports cpu-ns/op for the loop between start and stop.
type cpuTimer struct{ t0 time.Duration }

func startCPU(b *testing.B) *cpuTimer {
	runtime.LockOSThread()
	b.ResetTimer()
	return &cpuTimer{threadCPU()}
}

func (c *cpuTimer) stop(b *testing.B) {
	d := threadCPU() - c.t0
	b.StopTimer()
	runtime.UnlockOSThread()
	b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func benchManager(b *testing.B, cfg ScriptConfig) *Manager {
	b.Helper()
	m := NewManager(Options{})
	b.Cleanup(func() { m.Close() })
	m.Register("goSayHello", func(L *lua.LState) int { return 0 })
	if err := m.Load("bench.lua", benchScript, cfg); err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkTimeouts compares the ways to keep a time limit, on the report's
// call and on a loop of 1000 iterations (interpreter-bound):
//   - none: no context at all, the interpreter's fast loop (no limit);
//   - watchdog: our design, one context per VM set once, cancelled by the
//     watchdog goroutine only when a deadline passes;
//   - percall: gopher-lua's usual way, context.WithTimeout + SetContext +
//     RemoveContext around every call.
func BenchmarkTimeouts(b *testing.B) {
	for _, fn := range []struct {
		name string
		arg  lua.LValue
	}{{"helloLua", lua.LNumber(1)}, {"loop", lua.LNumber(1000)}} {
		for _, mode := range []string{"none", "watchdog", "percall"} {
			b.Run(fn.name+"/"+mode, func(b *testing.B) {
				cfg := ScriptConfig{Pool: PoolConfig{Strategy: StrategyCore, Core: 1}}
				if mode != "watchdog" {
					cfg.Timeout = -1
				}
				m := benchManager(b, cfg)
				b.ReportAllocs()
				err := m.Do(context.Background(), "bench.lua", func(vm *VM) error {
					f, err := vm.Func(fn.name)
					if err != nil {
						return err
					}
					ct := startCPU(b)
					defer ct.stop(b)
					for range b.N {
						if mode == "percall" {
							ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
							vm.L.SetContext(ctx)
							_, err = vm.Call1(f, fn.arg)
							vm.L.RemoveContext()
							cancel()
						} else {
							_, err = vm.Call1(f, fn.arg)
						}
						if err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// BenchmarkIsolation measures what isolating globals costs: the report's
// call with the proxy globals table (reads of goSayHello go through
// __index; the proxy is emptied only when a call wrote a global) against
// shared globals, and a call that writes a global every time.
func BenchmarkIsolation(b *testing.B) {
	const writer = `function w(n) last = n return n end`
	for _, share := range []bool{false, true} {
		name := "isolated"
		if share {
			name = "shared"
		}
		for _, fn := range []string{"helloLua", "w"} {
			b.Run(name+"/"+fn, func(b *testing.B) {
				m := benchManager(b, ScriptConfig{ShareGlobals: share})
				if err := m.Load("w.lua", writer, ScriptConfig{ShareGlobals: share}); err != nil {
					b.Fatal(err)
				}
				script := "bench.lua"
				if fn == "w" {
					script = "w.lua"
				}
				ctx := context.Background()
				b.ReportAllocs()
				ct := startCPU(b)
				defer ct.stop(b)
				for range b.N {
					err := m.Do(ctx, script, func(vm *VM) error {
						f, err := vm.Func(fn)
						if err != nil {
							return err
						}
						_, err = vm.Call1(f, lua.LNumber(1))
						return err
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkInvoke is the cost of the conversion layers on one goroutine:
// InvokeScriptFunc (Go values in, []any out) against Do + Call1.
func BenchmarkInvoke(b *testing.B) {
	m := benchManager(b, ScriptConfig{})
	b.Run("InvokeScriptFunc", func(b *testing.B) {
		b.ReportAllocs()
		ct := startCPU(b)
		defer ct.stop(b)
		for range b.N {
			if _, err := m.InvokeScriptFunc("bench.lua", "helloLua", 30*time.Second, 2, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DoCall1", func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		ct := startCPU(b)
		defer ct.stop(b)
		for range b.N {
			err := m.Do(ctx, "bench.lua", func(vm *VM) error {
				f, err := vm.Func("helloLua")
				if err != nil {
					return err
				}
				_, err = vm.Call1(f, lua.LNumber(1))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Call1InOneDo", func(b *testing.B) {
		b.ReportAllocs()
		err := m.Do(context.Background(), "bench.lua", func(vm *VM) error {
			f, err := vm.Func("helloLua")
			if err != nil {
				return err
			}
			ct := startCPU(b)
			defer ct.stop(b)
			for range b.N {
				if _, err := vm.Call1(f, lua.LNumber(1)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkRow is a computed column on one row per call: read two fields,
// write one, through NewRow (a proxy per row) and VM.Row (one reused proxy).
func BenchmarkRow(b *testing.B) {
	m := NewManager(Options{})
	b.Cleanup(func() { m.Close() })
	if err := m.Load("row.lua", `function f(row) row.total = row.price * row.qty return nil end`, ScriptConfig{}); err != nil {
		b.Fatal(err)
	}
	row := map[string]any{"id": "a", "price": 2.5, "qty": int64(4), "total": 0.0}
	for _, reuse := range []bool{false, true} {
		name := "NewRow"
		if reuse {
			name = "VM.Row"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			err := m.Do(context.Background(), "row.lua", func(vm *VM) error {
				fn, err := vm.Func("f")
				if err != nil {
					return err
				}
				ct := startCPU(b)
				defer ct.stop(b)
				for range b.N {
					var r lua.LValue
					if reuse {
						r = vm.Row(row)
					} else {
						r = NewRow(vm.State(), row)
					}
					if _, err := vm.Call1(fn, r); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkPoolContended is the pool under more callers than it may have
// VMs: 4000 goroutines (as `sluice bench pool`) on a pool bounded at
// 2 x GOMAXPROCS VMs, so that goroutines preempted in the middle of a call
// hold VMs and others must wait, as the default does once its bound is
// reached (1024 VMs at 16 CPUs). Run it with -cpu 2,4,8,16: on a machine
// with fewer cores than Ps this shows contention, not scaling. default is
// the default strategy, bounded only when the load reaches its bound.
func BenchmarkPoolContended(b *testing.B) {
	for _, name := range []string{"default", "bounded"} {
		b.Run(name, func(b *testing.B) {
			// The report's 30 s: with 4000 goroutines a goroutine
			// preempted mid-call may wait seconds for its next turn.
			cfg := ScriptConfig{Timeout: 30 * time.Second}
			if name == "bounded" {
				p := runtime.GOMAXPROCS(0)
				cfg.Pool = PoolConfig{Strategy: StrategyCore, Core: p, MaxNonCore: p}
			}
			m := benchManager(b, cfg)
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(max(4000/runtime.GOMAXPROCS(0), 1))
			steady := steadyProfiles()
			b.ResetTimer()
			cpu0 := processCPU()
			locks0 := m.Stats()[0].PoolLocks
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					err := m.Do(ctx, "bench.lua", func(vm *VM) error {
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
			b.StopTimer()
			steady()
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			if st := m.Stats(); len(st) == 1 {
				b.ReportMetric(float64(st[0].Waits)/float64(b.N), "waits/op")
				b.ReportMetric(float64(st[0].VMsCreated), "vms")
				b.ReportMetric(float64(st[0].PoolLocks-locks0)/float64(b.N), "locks/op")
			}
		})
	}
}

// steadyProfiles, with LUAVM_STEADY_PROFILE=1 (and go test's -mutexprofile
// or -blockprofile), turns the mutex and block profiles off for the first
// half second of a run and back on after it: 4000 goroutines starting at
// once each queue on the pool's lock once, which is otherwise most of the
// profile and says nothing about the steady state. The returned func turns
// them off again at the end of the run.
func steadyProfiles() (stop func()) {
	if os.Getenv("LUAVM_STEADY_PROFILE") == "" {
		return func() {}
	}
	runtime.SetMutexProfileFraction(0)
	runtime.SetBlockProfileRate(0)
	t := time.AfterFunc(500*time.Millisecond, func() {
		runtime.SetMutexProfileFraction(1)
		runtime.SetBlockProfileRate(1)
	})
	return func() {
		t.Stop()
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
	}
}
