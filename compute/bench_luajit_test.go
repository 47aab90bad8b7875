//go:build luajit && cgo

package compute

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/luavm"
)

// The engines side by side, in one run: native Go, gopher-lua (luavm's
// pool, batched) and LuaJIT (batched), on the engine comparison's workloads. Every
// variant gets fresh copies of the input row inside the timed loop (as in
// BenchmarkTrim), except "const", which measures the per-row cost of the
// boundary alone on rows the script does not change.
//
//	go test -tags luajit -run XXX -bench Engines -benchmem -benchtime 2000x -count 3 ./compute/
const (
	// build: copy the fields of the 19-field row except 7 into a new table,
	// encode it as JSON.
	luaBuild = `
local json = require("json")
local skip = {customKey1 = true, customKey2 = true, customKey3 = true, customKey12 = true,
  customKey13 = true, customKey22 = true, customKey23 = true}
function main(row)
  local t = {}
  for k, v in pairs(row) do
    if not skip[k] then t[k] = v end
  end
  return json.encode(t)
end
`
	luaFib = `
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
function main(row) return fib(row.n) end
`
	luaChecksum = `
local byte = string.byte
function main(row)
  local s = row.payload
  local h = 0
  for i = 1, #s do h = (h * 31 + byte(s, i)) % 4294967296 end
  return h
end
`
	luaConst = `function main(row) return 1 end`
)

var buildSkip = map[string]bool{"customKey1": true, "customKey2": true, "customKey3": true, "customKey12": true,
	"customKey13": true, "customKey22": true, "customKey23": true}

func nativeBuild(row map[string]any) (any, error) {
	t := make(map[string]any, len(row))
	for k, v := range row {
		if !buildSkip[k] {
			t[k] = v
		}
	}
	b, err := json.Marshal(t)
	return string(b), err
}

func fib(n int64) int64 {
	if n < 2 {
		return n
	}
	return fib(n-1) + fib(n-2)
}

func nativeFib(row map[string]any) (any, error) { return fib(row["n"].(int64)), nil }

func nativeChecksum(row map[string]any) (any, error) {
	s := row["payload"].(string)
	var h uint32
	for i := 0; i < len(s); i++ {
		h = h*31 + uint32(s[i])
	}
	return int64(h), nil
}

func nativeConst(map[string]any) (any, error) { return int64(1), nil }

// nativeBatch runs a Go function per row, as a BatchHandler.
type nativeBatch struct{ nativeHandler }

func (h nativeBatch) Values(_ context.Context, rows []map[string]any, out []any, errs []error) error {
	for i, r := range rows {
		out[i], errs[i] = h.fn(r)
	}
	return nil
}

func benchJIT(b *testing.B, code string) *engineLua {
	b.Helper()
	eng, err := NewLuaJITEngine()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close() })
	h, err := (&engineLua{eng: eng, name: "bench", cfg: EngineConfig{FuncName: "main"}}).compile(code, true)
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// benchShared runs h.Values on the same rows every time (no copy): for
// scripts that do not change their row.
func benchShared(b *testing.B, h BatchHandler, base map[string]any, want any) {
	b.Helper()
	const batch = 256
	rows := make([]map[string]any, batch)
	for i := range rows {
		rows[i] = maps.Clone(base)
	}
	out := make([]any, batch)
	errs := make([]error, batch)
	if err := h.Values(context.Background(), rows[:1], out[:1], errs[:1]); err != nil || errs[0] != nil || out[0] != want {
		b.Fatalf("%s computes %v (%v), want %v", h, out[0], errs[0], want)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += batch {
		k := min(batch, b.N-n)
		if err := h.Values(context.Background(), rows[:k], out[:k], errs[:k]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEngines(b *testing.B) {
	payload := strings.Repeat("sluice-checksum-", 64) // 1 KiB
	for _, w := range []struct {
		name, event, code string
		native            PluginFunc
		shared            bool
	}{
		{"build", jsonEvent, luaBuild, nativeBuild, false},
		{"trim", trimEvent, luaTrim, nativeTrim, false},
		{"fib25", `{"n":25}`, luaFib, nativeFib, true},
		{"checksum", `{"payload":"` + payload + `"}`, luaChecksum, nativeChecksum, true},
		{"const", jsonEvent, luaConst, nativeConst, true},
	} {
		base := benchRow(b, w.event)
		want, _ := w.native(maps.Clone(base))
		for _, e := range []struct {
			name string
			h    func(b *testing.B) BatchHandler
		}{
			{"native", func(*testing.B) BatchHandler { return nativeBatch{nativeHandler{w.native}} }},
			{"gopher-lua", func(b *testing.B) BatchHandler { return benchLua(b, w.code, luavm.PoolConfig{}) }},
			{"luajit", func(b *testing.B) BatchHandler { return benchJIT(b, w.code) }},
		} {
			b.Run(w.name+"/"+e.name, func(b *testing.B) {
				h := e.h(b)
				if w.shared {
					benchShared(b, h, base, want)
				} else {
					benchBatch(b, h, base, want.(string))
				}
			})
		}
	}
}

// BenchmarkEnginesInterleaved runs native Go, gopher-lua and LuaJIT in turn
// on 256 rows per round (the row copies made outside the timed part), b.N
// rounds, and reports each one's best round per row and its ratio to
// native: on a shared machine other processes only add time, so the best
// of interleaved rounds compares the engines under the same conditions.
//
//	go test -tags luajit -run XXX -bench EnginesInterleaved -benchtime 30x ./compute/
func BenchmarkEnginesInterleaved(b *testing.B) {
	payload := strings.Repeat("sluice-checksum-", 64)
	for _, w := range []struct {
		name, event, code string
		native            PluginFunc
	}{
		{"build", jsonEvent, luaBuild, nativeBuild},
		{"trim", trimEvent, luaTrim, nativeTrim},
		{"checksum", `{"payload":"` + payload + `"}`, luaChecksum, nativeChecksum},
		{"const", jsonEvent, luaConst, nativeConst},
		{"fib20", `{"n":20}`, luaFib, nativeFib},
	} {
		b.Run(w.name, func(b *testing.B) {
			base := benchRow(b, w.event)
			want, _ := w.native(maps.Clone(base))
			s, _ := want.(string)
			interleave(b, base, s, []variant{
				{"native", nativeHandler{w.native}},
				{"gopher-lua-batch", benchLua(b, w.code, luavm.PoolConfig{})},
				{"luajit-batch", benchJIT(b, w.code)},
			})
		})
	}
}

// BenchmarkEnginesParallel is the pool grid's shape for both engines: many
// goroutines each calling Value (one row, one VM acquisition) on the
// seed's helloLua-like script, with the default pools (gopher-lua: luavm's
// default strategy; LuaJIT: one VM per CPU, a channel of idle VMs).
//
//	go test -tags luajit -run XXX -bench EnginesParallel -benchmem -benchtime 1s ./compute/
func BenchmarkEnginesParallel(b *testing.B) {
	const code = `function main(row) return row.n + 1 end`
	base := benchRow(b, `{"n":1}`)
	for _, goroutines := range []int{2, 64, 4000} {
		for _, e := range []struct {
			name string
			h    func(b *testing.B) Handler
		}{
			{"gopher-lua", func(b *testing.B) Handler { return benchLua(b, code, luavm.PoolConfig{}) }},
			{"luajit", func(b *testing.B) Handler { return benchJIT(b, code) }},
		} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", e.name, goroutines), func(b *testing.B) {
				h := e.h(b)
				b.SetParallelism(max(1, goroutines/runtime.GOMAXPROCS(0)))
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						v, err := h.Value(base)
						if err != nil || v != int64(2) {
							b.Errorf("got %v %v", v, err)
							return
						}
					}
				})
			})
		}
	}
}
