package luavm

import (
	"context"
	"log/slog"

	lua "github.com/yuin/gopher-lua"
)

// The host modules every script can require on gopher-lua (LuaJIT's are in
// luajit/host.lua, over the same Host):
//
//	local log = require("log")
//	log.info(msg [, fields])        also log.debug, log.warn, log.error
//	local stats = require("stats")
//	stats.inc(name [, n] [, labels])     a counter (n defaults to 1)
//	stats.observe(name, value [, labels]) a histogram
//	stats.set(name, value [, labels])     a gauge
//
// They reach the script's Host (ScriptConfig.Host). Their cost when not
// called is nothing: the module tables are made at the first require of a
// VM, and the row a call is about is a field the caller sets per row
// (VM.AtRow), read only by a log line that is written.

// noHost serves the scripts loaded without a Host: their lines and series
// go nowhere.
var noHost = NewHost(HostOptions{LogRate: -1})

// hostModule builds the log or stats module of vm; ok is false for other
// names.
func (vm *VM) hostModule(name string) (*lua.LTable, bool) {
	L := vm.L
	switch name {
	case "log":
		t := L.NewTable()
		for fname, level := range logLevels {
			t.RawSetString(fname, L.NewFunction(vm.logFunc(fname, level)))
		}
		return t, true
	case "stats":
		t := L.NewTable()
		t.RawSetString("inc", L.NewFunction(vm.statsFunc("stats.inc", Counter)))
		t.RawSetString("set", L.NewFunction(vm.statsFunc("stats.set", Gauge)))
		t.RawSetString("observe", L.NewFunction(vm.statsFunc("stats.observe", Histogram)))
		return t, true
	}
	return nil, false
}

// Host is the script's Host (a shared one that discards everything when
// the script was loaded without one).
func (vm *VM) Host() *Host {
	if h := vm.pool.script.cfg.Host; h != nil {
		return h
	}
	return noHost
}

// AtRow tells the host modules which row the next call runs on: row i of
// the batch locate describes (locate nil: no source to tell).
func (vm *VM) AtRow(locate RowLocator, i int) {
	vm.locate, vm.rowIndex = locate, i
}

type rowLocatorKey struct{}

// WithRowLocator returns ctx carrying locate, for the engines to give the
// host modules: locate(i) is row i of the rows a Values call runs on (or,
// for rows held by column, row i of the batch).
func WithRowLocator(ctx context.Context, locate RowLocator) context.Context {
	return context.WithValue(ctx, rowLocatorKey{}, locate)
}

// RowLocatorOf is the locator ctx carries, or nil.
func RowLocatorOf(ctx context.Context) RowLocator {
	locate, _ := ctx.Value(rowLocatorKey{}).(RowLocator)
	return locate
}

// HostOf is the Host of the script L runs, for host functions registered
// with RegisterModule (compute's sluice.config).
func HostOf(L *lua.LState) *Host {
	if ud, ok := L.G.Registry.RawGetString(vmRegistryKey).(*lua.LUserData); ok {
		if vm, ok := ud.Value.(*VM); ok {
			return vm.Host()
		}
	}
	return noHost
}

// vmRegistryKey holds a VM's own userdata in its Lua registry (HostOf).
const vmRegistryKey = "sluice.vm"

// callerLine is the line of the Lua code that called the running Go
// function (0 if unknown).
func callerLine(L *lua.LState) int {
	dbg, ok := L.GetStack(1)
	if !ok {
		return 0
	}
	if _, err := L.GetInfo("l", dbg, lua.LNil); err != nil {
		return 0
	}
	return dbg.CurrentLine
}

func (vm *VM) logFunc(fname string, level slog.Level) lua.LGFunction {
	return func(L *lua.LState) int {
		msg := L.CheckString(1)
		fields := L.Get(2)
		if fields != lua.LNil && fields.Type() != lua.LTTable {
			L.ArgError(2, "fields must be a table")
		}
		h := vm.Host()
		if !h.Allow() {
			h.Suppressed(1)
			return 0
		}
		var attrs []slog.Attr
		if t, ok := fields.(*lua.LTable); ok {
			if m, ok := FromLua(t).(map[string]any); ok {
				for _, k := range sortedKeys(m) {
					attrs = append(attrs, slog.Any(k, m[k]))
				}
			}
		}
		h.Write(L.Context(), level, msg, callerLine(L), vm.locate, vm.rowIndex, attrs)
		return 0
	}
}

func (vm *VM) statsFunc(fname, kind string) lua.LGFunction {
	return func(L *lua.LState) int {
		name := L.CheckString(1)
		value := 1.0
		labelsAt := 3
		switch v := L.Get(2).(type) {
		case lua.LNumber:
			value = float64(v)
		case *lua.LTable:
			if kind != Counter {
				L.ArgError(2, "number expected")
			}
			labelsAt = 2
		case *lua.LNilType:
			if kind != Counter {
				L.ArgError(2, "number expected")
			}
		default:
			L.ArgError(2, "number expected")
		}
		labels := vm.labelBuf[:0] // Host.Series copies what it keeps
		if t, ok := L.Get(labelsAt).(*lua.LTable); ok {
			t.ForEach(func(k, v lua.LValue) {
				ks, kok := k.(lua.LString)
				if !kok {
					L.ArgError(labelsAt, "label names must be strings")
				}
				switch v.(type) {
				case lua.LString, lua.LNumber, lua.LBool:
				default:
					L.ArgError(labelsAt, "label values must be strings, numbers or booleans")
				}
				labels = append(labels, string(ks), v.String())
			})
		} else if L.Get(labelsAt) != lua.LNil {
			L.ArgError(labelsAt, "labels must be a table")
		}
		vm.labelBuf = labels
		s, err := vm.series(kind, name, labels)
		if err != nil {
			L.RaiseError("%s: %v", fname, err)
		}
		s.Add(value)
		return 0
	}
}

// series is the Host's series, through the VM's cache: a stats call on a
// series the VM has seen takes no lock.
func (vm *VM) series(kind, name string, labels []string) (*Series, error) {
	if len(labels) == 0 {
		// the common case, without building a key
		byName := vm.plainSeries[kind]
		if s, ok := byName[name]; ok {
			return s, nil
		}
		s, err := vm.Host().Series(kind, name, nil)
		if err != nil || s == nil {
			return nil, err
		}
		if byName == nil {
			if vm.plainSeries == nil {
				vm.plainSeries = make(map[string]map[string]*Series, 3)
			}
			byName = make(map[string]*Series)
			vm.plainSeries[kind] = byName
		}
		byName[name] = s
		return s, nil
	}
	key := seriesKey(kind, name, labels)
	if s, ok := vm.seriesCache[key]; ok {
		return s, nil
	}
	s, err := vm.Host().Series(kind, name, labels)
	if err != nil || s == nil {
		return nil, err
	}
	if vm.seriesCache == nil {
		vm.seriesCache = make(map[string]*Series)
	}
	vm.seriesCache[key] = s
	return s, nil
}
