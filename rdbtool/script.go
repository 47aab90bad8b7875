package rdbtool

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/sluicedb/sluice/luavm"
	"github.com/sluicedb/sluice/rdb"
)

// ScriptFunc is the global function a --script file must define. It is
// called once per selected key with a table e:
//
//	e.db, e.key, e.type ("string", "hash", ...), e.expire_at_ms (nil if none),
//	e.encoding (on-disk encoding name), e.value (decoded on first access)
//
// and returns false/nil to drop the key, true to keep it (its record is
// written as `sluice rdb jsonl` would), or a table written as one JSON line;
// `return true, row` writes both, `return false, row` the row only.
const ScriptFunc = "key"

// scriptBatch is the number of keys handled per VM acquisition (Manager.Do),
// scriptBatchTimeout the time a batch may take, and scriptLoadTimeout the time
// the script's top level may take (it defines functions; a minute there is a
// loop, not work).
const (
	scriptBatch        = 256
	scriptBatchTimeout = time.Minute
	scriptLoadTimeout  = 5 * time.Second
)

// ExportScript runs the Lua script at scriptPath on every selected key of
// the RDB file at path and writes what it returns to w (see ScriptFunc).
// Keys are handed to the script in batches, one VM acquisition per batch.
// e.value is decoded only if the script reads it; when it does, the key's
// JSON record is built in the same pass so a later `return true` costs
// nothing more.
func ExportScript(ctx context.Context, path string, w io.Writer, format Format, scriptPath string, opts Options) (Stats, error) {
	if opts.Filter.MinSize > 0 {
		return Stats{}, fmt.Errorf("rdbtool: --min-size cannot be combined with --script (the script sees e.value; filter on its size there)")
	}
	m := luavm.NewManager(luavm.Options{})
	defer m.Close()
	// The time limit covers a whole batch (one Do): scriptBatch keys, any
	// of which may hand the script a large value.
	src, err := os.ReadFile(scriptPath)
	if err != nil {
		return Stats{}, fmt.Errorf("rdbtool: script: %w", err)
	}
	cfg := luavm.ScriptConfig{Timeout: scriptBatchTimeout, LoadTimeout: scriptLoadTimeout}
	if err := m.LoadContext(ctx, scriptPath, string(src), cfg); err != nil {
		return Stats{}, err
	}
	in, err := openInput(path, "script", opts)
	if err != nil {
		return Stats{}, err
	}
	growPipe(w)
	sr := &scriptRun{ex: newExporter(w, format), in: in}
	sr.ex.onString = sr.stringValue
	sr.ex.onElement = sr.element
	sr.ex.open()
	var n int
	done := false
	var runErr error
	for !done && runErr == nil {
		runErr = m.Do(ctx, scriptPath, func(vm *luavm.VM) error {
			fn, err := vm.Func(ScriptFunc)
			if err != nil {
				return err
			}
			sr.begin(vm.State())
			for i := 0; i < scriptBatch; i++ {
				if !in.next(ctx, &n) {
					done = true
					return nil
				}
				if err := sr.key(vm, fn); err != nil {
					return err
				}
			}
			return nil
		})
	}
	err = in.finish(ctx, runErr)
	if err == nil {
		err = sr.ex.close()
	} else {
		sr.ex.abort()
	}
	return Stats{Keys: sr.ex.keys, InputSize: in.size}, err
}

// scriptRun is the state of one ExportScript.
type scriptRun struct {
	ex *exporter
	in *input
	L  *lua.LState
	e  *lua.LTable // the entry table handed to the script, reused per batch
	// Per key.
	entry  *rdb.Entry
	loaded bool // e.value was decoded (and ex.buf holds the key's record)
	value  lua.LValue
	// Lua value under construction (collections).
	stream *lua.LTable
}

// begin makes the entry table for a newly acquired VM.
func (sr *scriptRun) begin(L *lua.LState) {
	sr.L = L
	sr.e = L.NewTable()
	meta := L.NewTable()
	meta.RawSetString("__index", L.NewFunction(sr.index))
	L.SetMetatable(sr.e, meta)
}

// index is the entry table's __index: e.value decodes the value on first use.
func (sr *scriptRun) index(L *lua.LState) int {
	if L.CheckString(2) != "value" {
		L.Push(lua.LNil)
		return 1
	}
	if !sr.loaded {
		sr.loaded = true
		sr.value = lua.LNil
		switch sr.entry.Type {
		case rdb.String, rdb.Module:
		case rdb.Stream:
			sr.stream = L.NewTable()
			sr.value = sr.stream
		default:
			sr.value = L.NewTable()
		}
		if err := sr.ex.build(sr.in, sr.entry, true); err != nil {
			L.RaiseError("reading the value of key %q at offset %d: %v", sr.entry.Key, sr.entry.Offset, err)
		}
		sr.e.RawSetString("value", sr.value)
	}
	L.Push(sr.value)
	return 1
}

func (sr *scriptRun) stringValue(v []byte) { sr.value = lua.LString(v) }

func (sr *scriptRun) element(el *rdb.Element) {
	t, ok := sr.value.(*lua.LTable)
	if !ok {
		return
	}
	L := sr.L
	switch el.Kind {
	case rdb.ListItem, rdb.SetMember:
		t.Append(lua.LString(el.Member))
	case rdb.ZSetMember:
		m := L.CreateTable(0, 2)
		m.RawSetString("member", lua.LString(el.Member))
		m.RawSetString("score", lua.LNumber(el.Score))
		t.Append(m)
	case rdb.HashField:
		t.RawSetString(string(el.Member), lua.LString(el.Value))
	case rdb.StreamEntry:
		fields := L.CreateTable(0, len(el.Fields)/2)
		for i := 0; i+1 < len(el.Fields); i += 2 {
			fields.RawSetString(string(el.Fields[i]), lua.LString(el.Fields[i+1]))
		}
		m := L.CreateTable(0, 2)
		m.RawSetString("id", lua.LString(el.ID.String()))
		m.RawSetString("fields", fields)
		t.Append(m)
	}
}

// key runs the script on the current key and writes what it returns.
func (sr *scriptRun) key(vm *luavm.VM, fn *lua.LFunction) error {
	e := sr.in.p.Entry()
	sr.entry = e
	sr.loaded = false
	t := sr.e
	t.RawSetString("db", lua.LNumber(e.DB))
	t.RawSetString("key", lua.LString(e.Key))
	t.RawSetString("type", lua.LString(e.Type.String()))
	t.RawSetString("encoding", lua.LString(e.Encoding.String()))
	if e.ExpireAt != 0 {
		t.RawSetString("expire_at_ms", lua.LNumber(e.ExpireAt))
	} else {
		t.RawSetString("expire_at_ms", lua.LNil)
	}
	t.RawSetString("value", lua.LNil)
	rets, err := vm.Call(fn, 2, t)
	if err != nil {
		return fmt.Errorf("rdbtool: script on key %q (db %d) at offset %d: %w", e.Key, e.DB, e.Offset, err)
	}
	// keep, row: `return true`, `return false`, `return {row}` (row only),
	// `return true, {row}` (record and row), `return false, {row}`.
	first, second := rets[0], rets[1]
	keep := lua.LVAsBool(first)
	row, _ := second.(*lua.LTable)
	if t, ok := first.(*lua.LTable); ok {
		keep, row = false, t
	}
	ex := sr.ex
	if keep {
		// The record was built if the script read the value.
		if !sr.loaded {
			if err := ex.build(sr.in, e, true); err != nil {
				return err
			}
		}
		if err := ex.commit(); err != nil {
			return err
		}
	} else {
		ex.drop() // the key's own record, if e.value built it
	}
	if row == nil {
		return nil
	}
	ex.mark = len(ex.buf)
	if ex.keys > 0 && ex.format == JSON {
		ex.buf = append(ex.buf, ",\n"...)
	}
	ex.buf, err = appendLua(ex.buf, row, 0)
	if err != nil {
		return fmt.Errorf("rdbtool: script on key %q (db %d) at offset %d: returned row: %w", e.Key, e.DB, e.Offset, err)
	}
	if ex.format == JSONLines {
		ex.buf = append(ex.buf, '\n')
	}
	return ex.commit()
}

// appendLua appends a Lua value as JSON: tables that are sequences 1..n as
// arrays, other tables as objects with sorted keys, whole numbers as
// integers, json.null (luavm.Null) as null.
func appendLua(b []byte, v lua.LValue, depth int) ([]byte, error) {
	if depth > 100 {
		return b, fmt.Errorf("table nested deeper than 100 (cyclic?)")
	}
	switch v := v.(type) {
	case *lua.LNilType:
		return append(b, "null"...), nil
	case lua.LBool:
		return strconv.AppendBool(b, bool(v)), nil
	case lua.LNumber:
		f := float64(v)
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return strconv.AppendInt(b, int64(f), 10), nil
		}
		return appendFloat(b, f), nil
	case lua.LString:
		return appendString(b, []byte(v)), nil
	case *lua.LUserData:
		if v == luavm.Null {
			return append(b, "null"...), nil
		}
		return b, fmt.Errorf("cannot write userdata as JSON")
	case *lua.LTable:
		n := v.MaxN()
		count := 0
		v.ForEach(func(lua.LValue, lua.LValue) { count++ })
		var err error
		if n > 0 && n == count {
			b = append(b, '[')
			for i := 1; i <= n && err == nil; i++ {
				if i > 1 {
					b = append(b, ',')
				}
				b, err = appendLua(b, v.RawGetInt(i), depth+1)
			}
			return append(b, ']'), err
		}
		keys := make([]string, 0, count)
		v.ForEach(func(k, _ lua.LValue) { keys = append(keys, k.String()) })
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, []byte(k))
			b = append(b, ':')
			val := v.RawGetString(k)
			if val == lua.LNil {
				if num, perr := strconv.ParseFloat(k, 64); perr == nil {
					val = v.RawGet(lua.LNumber(num))
				}
			}
			if b, err = appendLua(b, val, depth+1); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	}
	return b, fmt.Errorf("cannot write a Lua %s as JSON", v.Type())
}
