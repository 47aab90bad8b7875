package compute

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/luavm"
)

// Lua is the loader of Lua functions, run by a luavm.Manager: compiled once,
// called in a pool of VMs. The row is passed as a luavm.NewRow proxy: fields
// convert only when the script reads them, writes go to the Go row, and
// json.encode(row) encodes the Go map in Go.
//
// The proxy is the VM's reused one (luavm's VM.Row, no allocation per row):
// it is valid during the call only, and a script that keeps row in an
// upvalue sees the next row through it.
//
// What a script sees when it reads row.x: strings as strings, bools as
// booleans, every number (int64, float64, json.Number) as a Lua number, that
// is a float64 (an integer beyond 2^53 read by a script is rounded; left
// untouched, it keeps every digit), JSON null as nil, objects and arrays as
// fresh tables (nulls inside them are json.null). What it returns is
// coerced to the column's type (see Coerce). Scripts can also
// require("sluice"), the host module (see LuaModule).
type Lua struct {
	m        *luavm.Manager
	name     string // column or filter name, the base of script names
	funcName string
	cfg      luavm.ScriptConfig
	script   string // the loaded version's script name in m; "" if unloaded
	budget   Budget // per batch, in Values
}

// ErrBatchBudget: the row was not run because its function had used its
// budget for the batch (Budget: batch_timeout, or max_timeouts rows timed
// out).
var ErrBatchBudget = errors.New("not run: the function's budget for this batch is used")

// NewLua returns the unloaded Lua loader for the function funcName (default
// "main") of the column or filter name.
func NewLua(m *luavm.Manager, name, funcName string, cfg luavm.ScriptConfig) *Lua {
	if funcName == "" {
		funcName = "main"
	}
	registerLuaModule(m)
	return &Lua{m: m, name: name, funcName: funcName, cfg: cfg}
}

// Load compiles inline code, or the Lua file or http(s) URL it names (see
// ResolveSource), checks that it defines the function, and returns the
// handler running it. Each load gets its own script name (name@hash.N), so
// a failed new version never replaces a running one; the caller closes the
// handler it replaces (Close unloads its script).
func (l *Lua) Load(uriOrCode string) (Handler, error) {
	src, code, err := luaSource(uriOrCode)
	if err != nil {
		return nil, err
	}
	return l.compile(context.Background(), code, sourceName(src, l.name), src.Kind == SourceInline)
}

// luaSource resolves inline code, a Lua file or an http(s) URL (see
// ResolveSource) to the source and its code; both engines load through it.
func luaSource(uriOrCode string) (Source, string, error) {
	src, err := ResolveSource(uriOrCode)
	if err != nil {
		return src, "", err
	}
	switch {
	case src.Plugin || src.Kind == SourceBuiltin:
		return src, "", fmt.Errorf("lua: %s is not Lua", src)
	case src.Kind == SourceFile:
		data, err := os.ReadFile(src.Path)
		if err != nil {
			return src, "", fmt.Errorf("lua: %w", err)
		}
		return src, string(data), nil
	case src.Kind == SourceHTTP || src.Kind == SourceS3:
		got, _, _, err := (&fetcher{}).fetch(context.Background(), src, nil, fetchState{})
		if err != nil {
			return src, "", fmt.Errorf("lua: %w", err)
		}
		return src, string(got.data), nil
	}
	return src, uriOrCode, nil
}

// sourceName is what Lua errors call a script: its file or URL, or for
// inline code the column's name (the unique script name luavm holds it
// under means nothing to users).
func sourceName(src Source, column string) string {
	switch src.Kind {
	case SourceFile:
		return src.Path
	case SourceHTTP, SourceS3:
		return src.URL
	}
	return column
}

func (l *Lua) compile(ctx context.Context, code, source string, inline bool) (*Lua, error) {
	if l.m == nil {
		return nil, errors.New("lua: no Lua runtime (Options.Lua is nil)")
	}
	// Every load gets its own script name (the content hash for people, a
	// sequence number for uniqueness): two columns, or two tables, loading
	// the same code must not share a script that one of them unloads.
	sum := sha256.Sum256([]byte(code))
	name := fmt.Sprintf("%s@%s.%d", l.name, hex.EncodeToString(sum[:6]), luaLoads.Add(1))
	h := &Lua{m: l.m, name: l.name, funcName: l.funcName, cfg: l.cfg, script: name, budget: l.budget}
	cfg := l.cfg
	cfg.SourceName = source
	if err := l.m.LoadContext(ctx, h.script, code, cfg); err != nil {
		var ce *luavm.CompileError
		if inline && errors.As(err, &ce) {
			return nil, fmt.Errorf("%w%s", err, inlineHint(code))
		}
		return nil, err
	}
	err := l.m.Do(context.Background(), h.script, func(vm *luavm.VM) error {
		_, err := vm.Func(h.funcName)
		return err
	})
	if err != nil {
		_ = l.m.Unload(h.script)
		if errors.Is(err, luavm.ErrNoFunction) {
			return nil, fmt.Errorf("lua: script defines no function %q: %w", h.funcName, err)
		}
		return nil, err
	}
	return h, nil
}

func (*Lua) String() string { return "lua" }

// Close unloads the script version.
func (l *Lua) Close() error {
	if l.script == "" {
		return nil
	}
	return l.m.Unload(l.script)
}

// Value calls the function on one row under its own VM acquisition.
func (l *Lua) Value(row map[string]any) (any, error) {
	out, errs := [1]any{}, [1]error{}
	if err := l.Values(context.Background(), []map[string]any{row}, out[:], errs[:]); err != nil {
		return nil, err
	}
	return out[0], errs[0]
}

// luaLoads numbers the Lua loads of the process, for unique script names.
var luaLoads atomic.Uint64

// errRowFailed ends a Do after a call error, so that the remaining rows run
// on a VM known to be sound (a timed-out or panicked VM is discarded);
// errBudget ends a Do that has used its share of the time limit.
var (
	errRowFailed = errors.New("row failed")
	errBudget    = errors.New("time budget used")
)

// Values calls the function on every row under one VM acquisition (Do) at a
// time. luavm bounds a whole Do by the script's timeout, while the timeout
// is meant per call: so a Do ends once it has run for an eighth of the
// timeout and the next rows continue under a fresh one, which leaves every
// row at least 7/8 of the timeout of its own while a batch of fast rows
// still takes one acquisition per few hundred thousand rows. A row that
// fails ends its acquisition too, and the following rows continue on a
// fresh VM, so a runaway row costs its neighbours nothing. If ctx has a
// deadline, it bounds the whole batch. The Budget bounds the batch too:
// once MaxTimeouts rows have timed out, or BatchTimeout has passed, the
// rows not yet run fail at once with ErrBatchBudget.
func (l *Lua) Values(ctx context.Context, rows []map[string]any, out []any, errs []error) error {
	return l.values(ctx, len(rows), func(vm *luavm.VM, i int) lua.LValue { return vm.Row(rows[i]) }, nil, out, nil, errs)
}

// ValuesColumns is Values for the rows at rows of a batch held by column:
// the script gets a view of its row (luavm's VM.RowAt) that reads the cells
// it touches and writes to the batch.
func (l *Lua) ValuesColumns(ctx context.Context, cb *colbatch.Batch, rows []int, out []any, errs []error) error {
	return l.ValuesColumnsNumbers(ctx, cb, rows, out, nil, errs)
}

// ValuesColumnsNumbers is ValuesColumns, but a number result is nums[i],
// with out[i] = luavm.Number, rather than boxed into out[i] (when nums is
// not nil).
func (l *Lua) ValuesColumnsNumbers(ctx context.Context, cb *colbatch.Batch, rows []int, out []any, nums []float64, errs []error) error {
	return l.values(ctx, len(rows), func(vm *luavm.VM, i int) lua.LValue { return vm.RowAt(cb, rows[i]) }, rows, out, nums, errs)
}

// values runs the function on n rows, row(vm, i) giving row i's proxy
// (the row at at[i] of the batch ctx's row locator knows, when at is not
// nil); number results go to nums unless it is nil.
func (l *Lua) values(ctx context.Context, n int, row func(vm *luavm.VM, i int) lua.LValue, at []int, out []any, nums []float64, errs []error) error {
	if l.script == "" {
		return errors.New("lua: not loaded")
	}
	locate := luavm.RowLocatorOf(ctx)
	if locate != nil && at != nil {
		locate = rowsAt(locate, at)
	}
	var budget time.Duration
	if _, ok := ctx.Deadline(); !ok {
		t := l.cfg.Timeout
		if t == 0 {
			t = luavm.DefaultTimeout
		}
		budget = t / 8
	}
	maxTimeouts := l.budget.MaxTimeouts
	if maxTimeouts == 0 {
		maxTimeouts = DefaultMaxTimeouts
	}
	var batchEnd time.Time
	if l.budget.BatchTimeout > 0 {
		batchEnd = time.Now().Add(l.budget.BatchTimeout)
	}
	timeouts := 0
	// spent reports whether the batch budget is used, and if so fails
	// every row from next on.
	spent := func(next int) bool {
		var why string
		switch {
		case maxTimeouts > 0 && timeouts >= maxTimeouts:
			why = fmt.Sprintf("%d rows of this batch timed out (max_timeouts: %d)", timeouts, maxTimeouts)
		case !batchEnd.IsZero() && next < n && time.Now().After(batchEnd):
			why = fmt.Sprintf("the batch_timeout of %v is used", l.budget.BatchTimeout)
		default:
			return false
		}
		err := fmt.Errorf("%w: %s", ErrBatchBudget, why)
		for i := next; i < n; i++ {
			errs[i] = err
		}
		return true
	}
	next := 0
	for next < n {
		if spent(next) {
			return nil
		}
		err := l.m.Do(ctx, l.script, func(vm *luavm.VM) error {
			fn, err := vm.Func(l.funcName)
			if err != nil {
				return err
			}
			start, tick := time.Now(), vm.Tick()
			for next < n {
				i := next
				next++
				vm.AtRow(locate, i)
				v, err := vm.Call1(fn, row(vm, i))
				if err != nil {
					errs[i] = err
					if errors.Is(err, luavm.ErrTimeout) {
						timeouts++
					}
					return errRowFailed
				}
				if x, ok := v.(lua.LNumber); ok && nums != nil {
					out[i], nums[i] = luavm.Number, float64(x)
				} else if err := l.checkSize(v); err != nil {
					errs[i] = err
				} else {
					out[i] = goValue(v)
				}
				// The time is read only once the watchdog's clock has
				// moved since the last look, i.e. about once a tick
				// (10 ms) rather than after every row: a Do ends at most
				// a tick after its share, well inside the slack of the
				// deadline, which the watchdog also judges every tick.
				if t := vm.Tick(); t != tick && next < n {
					tick = t
					if budget > 0 && time.Since(start) > budget {
						return errBudget
					}
					if !batchEnd.IsZero() && time.Now().After(batchEnd) {
						return errBudget // spent fails the rest
					}
				}
			}
			return nil
		})
		if err != nil && err != errRowFailed && err != errBudget {
			// No VM could be had (pool exhausted, manager closed, ctx done)
			// or the function is gone: every row not yet run fails with it.
			for i := next; i < n; i++ {
				errs[i] = err
			}
			return nil
		}
	}
	return nil
}

// checkSize fails a string result over max_result_bytes, before it is
// copied out of the VM (a table's size is bounded by the memory limit).
func (l *Lua) checkSize(v lua.LValue) error {
	s, ok := v.(lua.LString)
	if !ok {
		return nil
	}
	limit := l.budget.MaxResultBytes
	if limit == 0 {
		limit = luavm.DefaultMaxResultBytes
	}
	if limit > 0 && int64(len(s)) > limit {
		return &luavm.CallError{Script: l.name, Func: l.funcName, Err: luavm.ErrResultSize,
			Msg: fmt.Sprintf("the string returned, of %d bytes, is over the result size limit of %d bytes (max_result_bytes)", len(s), limit)}
	}
	return nil
}

// goValue converts a script's result without a detour through tables for
// the scalar results a column has.
func goValue(v lua.LValue) any {
	switch x := v.(type) {
	case lua.LString:
		return string(x)
	case lua.LBool:
		return bool(x)
	case *lua.LNilType:
		return nil
	}
	return luavm.FromLua(v)
}

// newLua builds the Lua handler of a column or filter from its code.
func (p *Processor) newLua(ctx context.Context, f *function, code string) (Handler, error) {
	if f.engine == EngineLuaJIT {
		return p.newJIT(f, code)
	}
	cfg := p.opts.LuaConfig
	if f.timeout > 0 {
		cfg.Timeout = f.timeout
	}
	if len(f.allow) > 0 {
		cfg.Allow = append(append([]string(nil), cfg.Allow...), f.allow...)
	}
	if f.budget.MemoryLimit != 0 {
		cfg.MemoryLimit = f.budget.MemoryLimit
	}
	cfg.Host = f.host
	if cfg.AllowHint == "" {
		kind := "column"
		if f.filter {
			kind = "filter"
		}
		cfg.AllowHint = "allow: [%s] in the " + kind + "'s config"
	}
	l := NewLua(p.opts.Lua, f.name, f.funcName, cfg)
	l.budget = f.budget
	return l.compile(ctx, code, sourceName(f.src, f.name), f.src.Kind == SourceInline)
}
