//go:build luajit && cgo

package luajit

/*
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime/cgo"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/internal/jsonw"
	"github.com/sluicedb/sluice/luavm"
)

// Cell tags: what the Go side lays out per field (keep in sync with host.lua).
const (
	tAbsent = iota
	tNull
	tStr    // a string needing no JSON escaping
	tStrEsc // a string that does
	tNum    // num is the value, the arena its JSON text
	tTrue
	tFalse
	tJSON // a map, slice or other value: its JSON text, decoded when read
	tRaw  // json.RawMessage: read as its text, encoded as is
	tTime // time.Time: num is unix seconds, the arena its JSON text
)

// Result tags, per row.
const (
	rNil = iota
	rStr
	rNum
	rTrue
	rFalse
	rJSON
	rRow
	rErr
	rTimeout
	rMem
	rCancel
)

// Patch tags, per field a script wrote.
const (
	pDel = iota
	pNull
	pStr
	pNum
	pTrue
	pFalse
	pJSON
)

const patchSize = 21 // packed sl_patch: row, klen, vlen int32; tag uint8; num float64

// vm is one LuaJIT state with its batch memory. It runs one batch at a time.
type vm struct {
	s       *Script
	L       *C.lua_State
	b       *C.sl_batch
	handle  cgo.Handle
	initRef C.int
	runRef  C.int
	fname   *C.char
	broken  bool

	// the batch being run, for the column callbacks: rows as maps, or the
	// rows at idx of cb (rows held by column, ValuesColumns)
	rows    []map[string]any
	cb      *colbatch.Batch
	idx     []int
	colIdx  map[string]int32
	names   []string
	scratch []byte
	cbErr   error
	// the host's metric series met so far, by kind and host.lua's key
	seriesCache map[string]*luavm.Series

	// what the engine's watchdog sees of the batch running (see watchdog.go)
	mu      sync.Mutex // held by end and by the watchdog's stores
	busy    bool       // a batch is running; guarded by mu
	seq     atomic.Uint64
	stopCtx func() bool
	// the watchdog's own view, touched by its goroutine only
	lastSeq uint64
	lastCur int32
	since   time.Time
	// stopped is when the watchdog first wrote the stop word for the row
	// stopSeq/stopCur (zero: no stop pending); guarded by mu, read by Stuck
	stopped time.Time
	stopSeq uint64
	stopCur int32
}

func (s *Script) newVM() (*vm, error) {
	L := C.sl_newstate()
	if L == nil {
		return nil, errors.New("luajit: cannot create a Lua state")
	}
	// No allocation may take the VM past twice its memory limit: the
	// checks in user code stop it at the limit between calls, this stops a
	// builtin in the middle of one (host.c, sl_alloc).
	C.sl_sethardlimit(L, C.size_t(2*s.cfg.MemoryLimit))
	v := &vm{s: s, L: L, colIdx: make(map[string]int32)}
	v.b = (*C.sl_batch)(C.calloc(1, C.size_t(unsafe.Sizeof(C.sl_batch{}))))
	v.handle = cgo.NewHandle(v)
	v.b.handle = C.uintptr_t(v.handle)
	v.fname = C.CString(s.funcName)
	src := C.CString(hostSource)
	defer C.free(unsafe.Pointer(src))
	allow := C.CString(strings.Join(s.cfg.Allow, ","))
	defer C.free(unsafe.Pointer(allow))
	params := C.CString(s.params)
	defer C.free(unsafe.Pointer(params))
	if st := C.sl_host(L, src, C.size_t(len(hostSource)), v.b, C.double(float64(s.cfg.MemoryLimit)/1024), C.double(float64(s.cfg.MaxResultBytes)), allow, params, &v.initRef, &v.runRef); st != 0 {
		err := fmt.Errorf("luajit: host module: %s", topString(L))
		v.close()
		return nil, err
	}
	bc := C.CString(s.bytecode)
	defer C.free(unsafe.Pointer(bc))
	name := C.CString("=" + s.name)
	defer C.free(unsafe.Pointer(name))
	s.eng.watchdog.add(v)
	v.begin(context.Background())
	st := C.sl_init(L, v.initRef, bc, C.size_t(len(s.bytecode)), name, v.fname)
	v.end()
	if st != 0 {
		err := fmt.Errorf("luajit: %s: loading the script: %s", s.name, topString(L))
		v.close()
		return nil, err
	}
	if C.lua_type(L, -1) == C.LUA_TSTRING {
		err := s.initError(topString(L))
		v.close()
		return nil, err
	}
	C.lua_settop(L, 0)
	s.stats.vmsCreated.Add(1)
	return v, nil
}

func (v *vm) close() {
	v.s.eng.watchdog.remove(v) // the watchdog must not read the batch memory freed below
	if v.L != nil {
		C.sl_close(v.L)
		v.L = nil
	}
	if v.b != nil {
		b := v.b
		for _, p := range []unsafe.Pointer{unsafe.Pointer(b.tag), unsafe.Pointer(b.num), unsafe.Pointer(b.off), unsafe.Pointer(b.len),
			unsafe.Pointer(b.name_off), unsafe.Pointer(b.name_len), unsafe.Pointer(b.order), unsafe.Pointer(b.arena),
			unsafe.Pointer(b.rtag), unsafe.Pointer(b.rnum), unsafe.Pointer(b.roff), unsafe.Pointer(b.rlen),
			unsafe.Pointer(b.out), unsafe.Pointer(b.pat), unsafe.Pointer(b.scr)} {
			C.free(p)
		}
		C.free(unsafe.Pointer(b))
		v.b = nil
		v.handle.Delete()
	}
	if v.fname != nil {
		C.free(unsafe.Pointer(v.fname))
		v.fname = nil
	}
}

// gcTotalLocated reports whether the checks read the VM's byte count
// directly (see sl_gctotal_addr).
func (v *vm) gcTotalLocated() bool { return C.sl_gctotal_addr(v.L) != nil }

// growArray reallocates a C array to hold n elements of size sz.
func growArray[T any](p **T, n int64) {
	var zero T
	q := C.realloc(unsafe.Pointer(*p), C.size_t(n)*C.size_t(unsafe.Sizeof(zero)))
	if q == nil {
		panic("luajit: out of C memory")
	}
	*p = (*T)(q)
}

// prepare sizes the batch memory for n rows (v.rows, or v.idx of v.cb)
// and resets it.
func (v *vm) prepare(n int64) {
	b := v.b
	if b.rcap < C.int64_t(n) {
		c := max(n, 256)
		growArray(&b.rtag, c)
		growArray(&b.rnum, c)
		growArray(&b.roff, c)
		growArray(&b.rlen, c)
		b.rcap = C.int64_t(c)
	}
	clear(unsafe.Slice((*byte)(unsafe.Pointer(b.rtag)), n))
	b.nrows = C.int32_t(n)
	b.ncols = 0
	b.all = 0
	b.arena_len = 0
	b.done = 0
	atomic.StoreInt32((*int32)(unsafe.Pointer(&b.stop)), 0)
	b.cur = 0
	clear(v.colIdx)
	v.names = v.names[:0]
	v.cbErr = nil
}

// ensureCols makes room for one more column.
func (v *vm) ensureCols() {
	b := v.b
	nc := int64(b.ncols) + 1
	if int64(b.cols_cap) < nc {
		c := max(nc*2, 32)
		growArray(&b.name_off, c)
		growArray(&b.name_len, c)
		growArray(&b.order, c)
		b.cols_cap = C.int64_t(c)
	}
	need := nc * int64(b.nrows)
	if int64(b.cells_cap) < need {
		c := max(need*2, 4096)
		growArray(&b.tag, c)
		growArray(&b.num, c)
		growArray(&b.off, c)
		growArray(&b.len, c)
		b.cells_cap = C.int64_t(c)
	}
}

// arena returns room for n more bytes in the arena: the slice to append
// to (len 0), and the offset it starts at.
func (v *vm) arena(n int) ([]byte, int32) {
	b := v.b
	need := int64(b.arena_len) + int64(n)
	if need > math.MaxInt32 {
		panic("luajit: batch arena over 2 GiB")
	}
	if int64(b.arena_cap) < need {
		c := max(need*2, 64<<10)
		growArray(&b.arena, c)
		b.arena_cap = C.int64_t(c)
	}
	off := int32(b.arena_len)
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(b.arena), off)), n)[:0], off
}

func (v *vm) putBytes(s string) (off, n int32) {
	dst, off := v.arena(len(s))
	dst = append(dst, s...)
	v.b.arena_len += C.int64_t(len(dst))
	return off, int32(len(dst))
}

// addColumn lays out the column key for every row of the batch.
func (v *vm) addColumn(key string) int32 {
	v.ensureCols()
	b := v.b
	c := int32(b.ncols)
	off, n := v.putBytes(key)
	unsafe.Slice(b.name_off, b.cols_cap)[c] = C.int32_t(off)
	unsafe.Slice(b.name_len, b.cols_cap)[c] = C.int32_t(n)
	v.colIdx[key] = c
	v.names = append(v.names, key)
	nr := int(b.nrows)
	base := int(c) * nr
	tags := unsafe.Slice((*uint8)(unsafe.Pointer(b.tag)), b.cells_cap)[base : base+nr]
	nums := unsafe.Slice((*float64)(unsafe.Pointer(b.num)), b.cells_cap)[base : base+nr]
	offs := unsafe.Slice((*int32)(unsafe.Pointer(b.off)), b.cells_cap)[base : base+nr]
	lens := unsafe.Slice((*int32)(unsafe.Pointer(b.len)), b.cells_cap)[base : base+nr]
	if v.cb != nil {
		cc := v.cb.Find(key)
		for i, r := range v.idx {
			if cc < 0 {
				tags[i] = tAbsent
				continue
			}
			tags[i], nums[i], offs[i], lens[i] = v.colCell(v.cb.Cols[cc].Cells[r])
		}
	}
	for i, r := range v.rows {
		val, ok := r[key]
		if !ok {
			tags[i] = tAbsent
			continue
		}
		tags[i], nums[i], offs[i], lens[i] = v.cell(val)
	}
	b.ncols = C.int32_t(c + 1)
	if b.all != 0 {
		v.sortOrder()
	}
	return c
}

// colCell is cell of a column batch's cell, its scalars without boxing.
func (v *vm) colCell(c colbatch.Cell) (tag uint8, num float64, off, n int32) {
	switch c.Kind {
	case colbatch.Absent:
		return tAbsent, 0, 0, 0
	case colbatch.Null:
		return tNull, 0, 0, 0
	case colbatch.Int:
		return v.intCell(c.I)
	case colbatch.Float:
		return v.floatCell(c.Float())
	case colbatch.String:
		return v.stringCell(c.S)
	case colbatch.Bool:
		if c.I != 0 {
			return tTrue, 0, 0, 0
		}
		return tFalse, 0, 0, 0
	}
	val, _ := v.cb.Any(c)
	return v.cell(val)
}

func (v *vm) stringCell(x string) (tag uint8, num float64, off, n int32) {
	off, n = v.putBytes(x)
	if needsEscape(x) {
		return tStrEsc, 0, off, n
	}
	return tStr, 0, off, n
}

// A number cell whose len is noText has no text in the arena: its JSON is
// the host's fmtnum of num (sl_fmtnum writes a float64 as encoding/json
// does, and an integer below 2^53 as its digits), made only if the script
// encodes the row. Writing the text of every number laid out, read or not,
// was a third of a one-column batch's cost.
const noText = -1

func (v *vm) intCell(x int64) (tag uint8, num float64, off, n int32) {
	if x > -(1<<53) && x < 1<<53 {
		return tNum, float64(x), 0, noText
	}
	dst, off := v.arena(20)
	dst = strconv.AppendInt(dst, x, 10)
	v.b.arena_len += C.int64_t(len(dst))
	return tNum, float64(x), off, int32(len(dst))
}

func (v *vm) floatCell(x float64) (tag uint8, num float64, off, n int32) {
	if !math.IsNaN(x) && !math.IsInf(x, 0) {
		return tNum, x, 0, noText
	}
	dst, off := v.arena(32)
	dst, err := jsonw.AppendFloat(dst, x, 64)
	if err != nil { // NaN, Inf: no JSON text; encode writes null
		dst = append(dst[:0], "null"...)
	}
	v.b.arena_len += C.int64_t(len(dst))
	return tNum, x, off, int32(len(dst))
}

// cell lays out one value.
func (v *vm) cell(val any) (tag uint8, num float64, off, n int32) {
	switch x := val.(type) {
	case nil:
		return tNull, 0, 0, 0
	case string:
		return v.stringCell(x)
	case bool:
		if x {
			return tTrue, 0, 0, 0
		}
		return tFalse, 0, 0, 0
	case int64:
		return v.intCell(x)
	case float64:
		return v.floatCell(x)
	case json.Number:
		f, _ := strconv.ParseFloat(string(x), 64)
		off, n = v.putBytes(string(x))
		return tNum, f, off, n
	case json.RawMessage:
		off, n = v.putBytes(string(x))
		return tRaw, 0, off, n
	case time.Time:
		var err error
		v.scratch, err = jsonw.AppendValue(v.scratch[:0], x)
		if err != nil {
			v.scratch = append(v.scratch[:0], "null"...)
		}
		off, n = v.putBytes(string(v.scratch))
		return tTime, float64(x.UnixNano()) / 1e9, off, n
	case int:
		return v.cell(int64(x))
	case int32:
		return v.cell(int64(x))
	case float32:
		return v.cell(float64(x))
	}
	var err error
	v.scratch, err = jsonw.AppendValue(v.scratch[:0], val)
	if err != nil {
		v.scratch = append(v.scratch[:0], "null"...)
	}
	off, n = v.putBytes(string(v.scratch))
	return tJSON, 0, off, n
}

// needsEscape reports whether JSON needs more than quotes around s.
func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' {
			return true
		}
		if c >= utf8.RuneSelf {
			// invalid UTF-8 and U+2028/2029 are escaped; leave those to C
			return !utf8.ValidString(s[i:]) || strings.Contains(s[i:], "\u2028") || strings.Contains(s[i:], "\u2029")
		}
	}
	return false
}

// allColumns lays out every key of every row and sorts the columns by name.
// Rows of a batch mostly share their keys: the first row's keys are laid
// out for all rows, and a later row is scanned for keys of its own only
// when it has more keys than it has cells among the columns so far.
func (v *vm) allColumns() int32 {
	if v.cb != nil {
		for c := range v.cb.Cols {
			col := &v.cb.Cols[c]
			if _, ok := v.colIdx[col.Name]; ok {
				continue
			}
			for _, r := range v.idx {
				if col.Cells[r].Kind != colbatch.Absent {
					v.addColumn(col.Name)
					break
				}
			}
		}
	}
	for i, r := range v.rows {
		if v.present(i) == len(r) {
			continue
		}
		for k := range r {
			if _, ok := v.colIdx[k]; !ok {
				v.addColumn(k)
			}
		}
	}
	v.b.all = 1
	v.sortOrder()
	return int32(v.b.ncols)
}

// present counts the cells row i has in the columns laid out.
func (v *vm) present(i int) int {
	b := v.b
	nr, n := int(b.nrows), 0
	tags := unsafe.Slice((*uint8)(unsafe.Pointer(b.tag)), b.cells_cap)
	for c := range int(b.ncols) {
		if tags[c*nr+i] != tAbsent {
			n++
		}
	}
	return n
}

func (v *vm) sortOrder() {
	order := unsafe.Slice((*int32)(unsafe.Pointer(v.b.order)), v.b.cols_cap)[:v.b.ncols]
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(v.names[a], v.names[b]) })
}

//export slColumn
func slColumn(h C.uintptr_t, k *C.char, n C.size_t) (c C.int32_t) {
	v := cgo.Handle(h).Value().(*vm)
	defer func() {
		if r := recover(); r != nil {
			v.cbErr = fmt.Errorf("luajit: laying out a column: %v", r)
			v.broken = true
			c = -1
		}
	}()
	key := C.GoStringN(k, C.int(n))
	if i, ok := v.colIdx[key]; ok {
		return C.int32_t(i)
	}
	return C.int32_t(v.addColumn(key))
}

//export slColumns
func slColumns(h C.uintptr_t) (c C.int32_t) {
	v := cgo.Handle(h).Value().(*vm)
	defer func() {
		if r := recover(); r != nil {
			v.cbErr = fmt.Errorf("luajit: laying out a row: %v", r)
			v.broken = true
			c = -1
		}
	}()
	return C.int32_t(v.allColumns())
}

// run runs the function on the rows: lay-out happens lazily, from the
// host, as the script reads columns.
func (v *vm) run(ctx context.Context, rows []map[string]any, out []any, errs []error) error {
	v.rows, v.cb, v.idx = rows, nil, nil
	return v.runRows(ctx, len(rows), out, nil, errs)
}

// runColumns is run for the rows at idx of cb: the columns the script
// reads are laid out from cb's cells, and its writes go to them.
func (v *vm) runColumns(ctx context.Context, cb *colbatch.Batch, idx []int, out []any, nums []float64, errs []error) error {
	v.rows, v.cb, v.idx = nil, cb, idx
	return v.runRows(ctx, len(idx), out, nums, errs)
}

// rowMap is row i of the batch as a map: the caller's, or for rows held by
// column a map made of the row's cells.
func (v *vm) rowMap(i int) map[string]any {
	if v.cb == nil {
		return v.rows[i]
	}
	r := v.idx[i]
	m := make(map[string]any)
	for c := range v.cb.Cols {
		if val, ok := v.cb.Any(v.cb.Cols[c].Cells[r]); ok {
			m[v.cb.Cols[c].Name] = val
		}
	}
	return m
}

// runRows runs the batch laid out; a number result goes to nums (out[i] =
// luavm.Number) unless nums is nil.
func (v *vm) runRows(ctx context.Context, nrows int, out []any, nums []float64, errs []error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v.prepare(int64(nrows))
	room := v.s.host.AllowN(min(nrows, v.s.host.LogBurst()))
	v.b.logroom = C.int32_t(room)
	v.b.side_len = 0
	v.begin(ctx)
	st := C.sl_run(v.L, v.runRef, v.fname, C.int(nrows))
	v.end()
	defer v.hostCalls(ctx, room)
	stats := &v.s.stats
	stats.batches.Add(1)
	stats.rows.Add(uint64(nrows))
	defer func() {
		var failed uint64
		for _, err := range errs {
			if err != nil {
				failed++
			}
		}
		stats.errors.Add(failed)
	}()
	if st != 0 {
		// the host itself failed (out of memory in the driver): nothing of
		// the batch can be trusted
		v.broken = true
		msg := topString(v.L)
		C.lua_settop(v.L, 0)
		err := fmt.Errorf("luajit: %s: %s", v.s.name, msg)
		if v.cbErr != nil {
			err = v.cbErr
		}
		for i := range errs {
			errs[i] = err
		}
		return nil
	}
	b := v.b
	done := int(b.done)
	if err := v.applyPatches(); err != nil {
		v.broken = true
		for i := range errs {
			errs[i] = err
		}
		return nil
	}
	n := nrows
	rtag := unsafe.Slice((*uint8)(unsafe.Pointer(b.rtag)), n)
	rnum := unsafe.Slice((*float64)(unsafe.Pointer(b.rnum)), n)
	roff := unsafe.Slice((*int64)(unsafe.Pointer(b.roff)), n)
	rlen := unsafe.Slice((*int64)(unsafe.Pointer(b.rlen)), n)
	outb := unsafe.Slice((*byte)(unsafe.Pointer(b.out)), b.out_len)
	for i := range n {
		if i > done || i == done && rtag[i] == rCancel {
			err := ctx.Err()
			if err == nil {
				err = context.Canceled
			}
			errs[i] = &luavm.CallError{Script: v.s.name, Func: v.s.funcName, Msg: err.Error(), Err: err}
			out[i] = nil
			continue
		}
		errs[i] = nil
		switch rtag[i] {
		case rNil:
			out[i] = nil
		case rStr:
			out[i] = string(outb[roff[i] : roff[i]+rlen[i]])
		case rNum:
			if nums != nil {
				out[i], nums[i] = luavm.Number, rnum[i]
			} else {
				out[i] = numberToGo(rnum[i])
			}
		case rTrue:
			out[i] = true
		case rFalse:
			out[i] = false
		case rRow:
			out[i] = v.rowMap(i)
		case rJSON:
			val, err := decodeJSON(outb[roff[i] : roff[i]+rlen[i]])
			out[i], errs[i] = val, err
		case rErr:
			out[i] = nil
			if v.cbErr != nil {
				errs[i] = v.cbErr
				continue
			}
			ce := v.s.callError(v.s.funcName, string(outb[roff[i]:roff[i]+rlen[i]]))
			if ce.Msg == "error in error handling" {
				// the host's handler is what failed: only when the stack is full
				ce.Msg = "stack overflow (endless recursion?)"
			}
			if strings.Contains(ce.Msg, "stack overflow") {
				v.broken = true
			}
			if strings.Contains(ce.Msg, "(max_result_bytes)") {
				ce.Err = luavm.ErrResultSize
			}
			errs[i] = ce
		case rTimeout:
			stats.timeouts.Add(1)
			out[i] = nil
			errs[i] = &luavm.CallError{Script: v.s.name, Func: v.s.funcName, Msg: luavm.ErrTimeout.Error(), Err: luavm.ErrTimeout}
		case rMem:
			stats.memoryStops.Add(1)
			out[i] = nil
			v.broken = true // what the row kept alive may still be there
			errs[i] = &luavm.CallError{Script: v.s.name, Func: v.s.funcName,
				Msg: fmt.Sprintf("%v: the VM's Lua heap went over %d bytes", luavm.ErrMemoryLimit, v.s.cfg.MemoryLimit), Err: luavm.ErrMemoryLimit}
		}
	}
	return nil
}

// applyPatches writes the fields scripts set or deleted into the Go rows.
func (v *vm) applyPatches() error {
	b := v.b
	p := unsafe.Slice((*byte)(unsafe.Pointer(b.pat)), b.pat_len)
	for len(p) >= patchSize {
		row := int32(binary.LittleEndian.Uint32(p[0:]))
		klen := int(int32(binary.LittleEndian.Uint32(p[4:])))
		vlen := int(int32(binary.LittleEndian.Uint32(p[8:])))
		tag := p[12]
		num := math.Float64frombits(binary.LittleEndian.Uint64(p[13:]))
		p = p[patchSize:]
		if klen+vlen > len(p) || row < 0 || int64(row) >= int64(v.b.nrows) {
			return errors.New("luajit: corrupt patch buffer")
		}
		key := string(p[:klen])
		val := p[klen : klen+vlen]
		p = p[klen+vlen:]
		var x any
		switch tag {
		case pDel:
			v.deleteField(int(row), key)
			continue
		case pNull:
			x = nil
		case pStr:
			x = string(val)
		case pNum:
			x = numberToGo(num)
		case pTrue:
			x = true
		case pFalse:
			x = false
		case pJSON:
			var err error
			if x, err = decodeJSON(val); err != nil {
				return err
			}
		default:
			continue
		}
		v.setField(int(row), key, x)
	}
	return nil
}

// setField writes x to key of row i of the batch.
func (v *vm) setField(i int, key string, x any) {
	if v.cb == nil {
		v.rows[i][key] = x
		return
	}
	v.cb.Set(v.cb.ColumnOf(key), v.idx[i], x)
}

// deleteField removes key from row i of the batch.
func (v *vm) deleteField(i int, key string) {
	if v.cb == nil {
		delete(v.rows[i], key)
		return
	}
	if c := v.cb.Find(key); c >= 0 {
		v.cb.Cols[c].Cells[v.idx[i]] = colbatch.Cell{}
	}
}

// numberToGo: a whole number is an int64, others float64 (as luavm).
func numberToGo(f float64) any {
	if f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 {
		return int64(f)
	}
	return f
}

// decodeJSON turns a table the script returned (encoded by the host) into
// maps, slices and numbers as luavm.FromLua gives them.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return nil, fmt.Errorf("luajit: decoding a table result: %w", err)
	}
	return numbers(x), nil
}

func numbers(x any) any {
	switch t := x.(type) {
	case json.Number:
		f, _ := strconv.ParseFloat(string(t), 64)
		return numberToGo(f)
	case map[string]any:
		for k, e := range t {
			t[k] = numbers(e)
		}
	case []any:
		for i, e := range t {
			t[i] = numbers(e)
		}
	}
	return x
}
