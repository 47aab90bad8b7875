package luavm

import (
	"math"
	"sort"
	"unsafe"

	lua "github.com/yuin/gopher-lua"

	"github.com/sluicedb/sluice/internal/colbatch"
)

// rowTypeName names the row proxy metatable in each VM's registry.
const rowTypeName = "sluice.row"

// rowData is what a row proxy userdata holds: the caller's map, or row r
// of a batch held by column (cb non-nil), read and written in place.
type rowData struct {
	m  map[string]any
	cb *colbatch.Batch
	r  int
	// hint caches the column of the keys read (by a hash of the key), so
	// that reading row.x in row after row costs no map lookup; an entry
	// is used only when its column has the key's name.
	hint [8]int32
	// nums is the block the numbers read are boxed in (number).
	nums []float64
}

// column is cb.Find(key).
func (r *rowData) column(key string) int {
	if len(key) == 0 {
		return r.cb.Find(key)
	}
	h := (len(key) + int(key[0]) + 3*int(key[len(key)-1])) & 7
	if c := int(r.hint[h]); c < len(r.cb.Cols) && r.cb.Cols[c].Name == key {
		return c
	}
	c := r.cb.Find(key)
	if c >= 0 {
		r.hint[h] = int32(c)
	}
	return c
}

// get is the row's value of key; ok is false when the row has no such key.
func (r *rowData) get(key string) (v any, ok bool) {
	if r.cb == nil {
		v, ok = r.m[key]
		return v, ok
	}
	c := r.column(key)
	if c < 0 {
		return nil, false
	}
	return r.cb.Any(r.cb.Cols[c].Cells[r.r])
}

// set writes v (FromLua's value) to key; delete removes key.
func (r *rowData) set(key string, v any) {
	if r.cb == nil {
		r.m[key] = v
		return
	}
	r.cb.Set(r.cb.ColumnOf(key), r.r, v)
}

func (r *rowData) delete(key string) {
	if r.cb == nil {
		delete(r.m, key)
		return
	}
	if c := r.cb.Find(key); c >= 0 {
		r.cb.Cols[c].Cells[r.r] = colbatch.Cell{}
	}
}

// keys are the row's keys, sorted.
func (r *rowData) keys() []string {
	if r.cb == nil {
		return sortedKeys(r.m)
	}
	var keys []string
	for i := range r.cb.Cols {
		if r.cb.Cols[i].Cells[r.r].Kind != colbatch.Absent {
			keys = append(keys, r.cb.Cols[i].Name)
		}
	}
	sort.Strings(keys)
	return keys
}

func (r *rowData) len() int {
	if r.cb == nil {
		return len(r.m)
	}
	n := 0
	for i := range r.cb.Cols {
		if r.cb.Cols[i].Cells[r.r].Kind != colbatch.Absent {
			n++
		}
	}
	return n
}

// goMap is the row as a map: the caller's map itself, or for a row held by
// column a new map of its values (a snapshot: writes to it do not reach
// the batch).
func (r *rowData) goMap() map[string]any {
	if r.cb == nil {
		return r.m
	}
	m := make(map[string]any, r.len())
	for i := range r.cb.Cols {
		if v, ok := r.cb.Any(r.cb.Cols[i].Cells[r.r]); ok {
			m[r.cb.Cols[i].Name] = v
		}
	}
	return m
}

// NewRow returns a lazy proxy of row for Lua: row.x and row["x"] convert only
// the field read; row.x = v writes FromLua(v) into the Go map and row.x = nil
// deletes the key; pairs(row) iterates the keys in sorted order; json.encode
// (row) marshals the Go map itself. The proxy must not be used after the call
// that received it returns if the caller reuses the map.
func NewRow(L *lua.LState, row map[string]any) lua.LValue {
	ud := L.NewUserData()
	ud.Value = &rowData{m: row}
	ud.Metatable = L.GetTypeMetatable(rowTypeName)
	return ud
}

// Row is NewRow without allocating: the VM keeps one proxy and points it at
// row. The value is valid until the next Row call on this VM, so it suits the
// hot path of one row per call (Do + Call1); a script that keeps the proxy
// past the call (in a global or upvalue) sees the next row through it, so
// use NewRow when rows must outlive the call.
func (vm *VM) Row(row map[string]any) lua.LValue {
	if vm.row == nil {
		vm.rowData = &rowData{}
		vm.row = vm.L.NewUserData()
		vm.row.Value = vm.rowData
		vm.row.Metatable = vm.L.GetTypeMetatable(rowTypeName)
	}
	vm.rowData.m, vm.rowData.cb = row, nil
	return vm.row
}

// RowAt is Row for row r of a batch held by column: the script reads the
// cells it touches, without a map per row, and its writes and deletes go
// to the batch's cells (a new key adds a column). Valid as Row is, until
// the next Row or RowAt call on this VM.
func (vm *VM) RowAt(cb *colbatch.Batch, r int) lua.LValue {
	vm.Row(nil)
	vm.rowData.cb, vm.rowData.r = cb, r
	return vm.row
}

// DeleteField deletes key from the row proxy v; false when v is not one.
func DeleteField(v lua.LValue, key string) bool {
	ud, ok := v.(*lua.LUserData)
	if !ok {
		return false
	}
	r, ok := ud.Value.(*rowData)
	if !ok {
		return false
	}
	r.delete(key)
	return true
}

// IsRow reports whether v is a row proxy.
func IsRow(v lua.LValue) bool {
	ud, ok := v.(*lua.LUserData)
	if !ok {
		return false
	}
	_, ok = ud.Value.(*rowData)
	return ok
}

func installRowType(L *lua.LState) {
	mt := L.NewTypeMetatable(rowTypeName)
	mt.RawSetString("__index", L.NewFunction(rowIndex))
	mt.RawSetString("__newindex", L.NewFunction(rowNewIndex))
	mt.RawSetString("__len", L.NewFunction(rowLen))
	mt.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LString("row"))
		return 1
	}))
}

func checkRow(L *lua.LState) *rowData {
	ud := L.CheckUserData(1)
	r, ok := ud.Value.(*rowData)
	if !ok {
		L.ArgError(1, "row expected")
	}
	return r
}

func rowIndex(L *lua.LState) int {
	r := checkRow(L)
	L.Push(r.lua(L, L.CheckString(2)))
	return 1
}

// lua is row.key as the script reads it (rowIndex, and getRowField for
// row.key with a constant key).
func (r *rowData) lua(L *lua.LState, key string) lua.LValue {
	if r.cb != nil {
		return r.cellToLua(L, r.column(key))
	}
	v, ok := r.m[key]
	if !ok || v == nil {
		return lua.LNil
	}
	return ToLua(L, v)
}

// cellToLua is ToLua of the value of column c (-1: none) in row r, the
// scalars without boxing them into an any first, and numbers boxed into
// r's blocks (number).
func (r *rowData) cellToLua(L *lua.LState, c int) lua.LValue {
	if c < 0 {
		return lua.LNil
	}
	cell := r.cb.Cols[c].Cells[r.r]
	switch cell.Kind {
	case colbatch.Int:
		if cell.I >= -256 && cell.I < 1024 {
			return smallNumbers[cell.I+256]
		}
		return r.number(float64(cell.I))
	case colbatch.Float:
		return r.number(cell.Float())
	case colbatch.String:
		return lua.LString(cell.S)
	case colbatch.Bool:
		return lua.LBool(cell.I != 0)
	case colbatch.Value:
		if v, _ := r.cb.Any(cell); v != nil {
			return ToLua(L, v)
		}
	}
	return lua.LNil
}

// numberBlock is how many numbers a row's block boxes.
const numberBlock = 256

// number is floatNumber(f) boxed without an allocation of its own: an
// interface holding a float64 points to it, so the float64s of the cells
// read are laid in blocks of numberBlock, one allocation per block (a
// block lives as long as any number boxed in it). gopher-lua boxes the
// results of arithmetic the same way (its allocator); a row's reads were
// the one allocation per row left on a one-column batch.
func (r *rowData) number(f float64) lua.LValue {
	if f >= -256 && f < 1024 && f == math.Trunc(f) && !(f == 0 && math.Signbit(f)) {
		return smallNumbers[int(f)+256]
	}
	if len(r.nums) == cap(r.nums) {
		r.nums = make([]float64, 0, numberBlock)
	}
	r.nums = append(r.nums, f)
	v := lua.LValue(lua.LNumber(0))
	(*iface)(unsafe.Pointer(&v)).data = unsafe.Pointer(&r.nums[len(r.nums)-1])
	return v
}

// iface is the layout of an interface value: its type (for lua.LValue, a
// non-empty interface, the itab of the dynamic type) and a pointer to its
// value (a float64 for lua.LNumber; number never writes it again).
type iface struct {
	tab, data unsafe.Pointer
}

func rowNewIndex(L *lua.LState) int {
	r := checkRow(L)
	r.setLua(L.CheckString(2), L.Get(3))
	return 0
}

// setLua is row.key = v as the script writes it (rowNewIndex, and
// setRowField for row.key = v with a constant key): nil deletes the key,
// other values are stored as FromLua gives them. In a row held by column
// a number, string or boolean goes straight to its cell (the cell Set
// makes of FromLua's value), without boxing it into an any first.
func (r *rowData) setLua(key string, v lua.LValue) {
	if v == lua.LNil {
		r.delete(key)
		return
	}
	if r.cb != nil {
		var cell colbatch.Cell
		switch x := v.(type) {
		case lua.LNumber:
			if f := float64(x); isInt64(f) {
				cell = colbatch.Cell{Kind: colbatch.Int, I: int64(f)}
			} else {
				cell = colbatch.Cell{Kind: colbatch.Float, I: int64(math.Float64bits(f))}
			}
		case lua.LString:
			cell = colbatch.Cell{Kind: colbatch.String, S: string(x)}
		case lua.LBool:
			cell = colbatch.Cell{Kind: colbatch.Bool}
			if x {
				cell.I = 1
			}
		default:
			r.set(key, FromLua(v))
			return
		}
		c := r.column(key)
		if c < 0 {
			c = r.cb.ColumnOf(key)
		}
		r.cb.Cols[c].Cells[r.r] = cell
		return
	}
	r.set(key, FromLua(v))
}

func rowLen(L *lua.LState) int {
	r := checkRow(L)
	L.Push(lua.LNumber(r.len()))
	return 1
}

// rowPairs is pairs() for a row proxy (gopher-lua's pairs has no __pairs):
// it walks a sorted snapshot of the keys taken when pairs was called.
func rowPairs(L *lua.LState, r *rowData) int {
	keys := r.keys()
	i := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		for i < len(keys) {
			k := keys[i]
			i++
			if v, ok := r.get(k); ok {
				L.Push(lua.LString(k))
				if v == nil {
					L.Push(Null)
				} else {
					L.Push(ToLua(L, v))
				}
				return 2
			}
		}
		L.Push(lua.LNil)
		return 1
	}))
	L.Push(lua.LNil)
	L.Push(lua.LNil)
	return 3
}
