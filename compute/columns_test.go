package compute

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
)

// columnsMixConfig exercises everything a script can do to its row, on
// engine ENGINE: reads of every kind of value, writes (new keys, changed
// and nulled ones), deletes by assignment and by sluice.delete, pairs, #row,
// json.encode and sluice.encode of the row, returning the row, a filter, the
// four row-failing policies and later columns reading earlier ones.
const columnsMixConfig = `
filters:
  - name: not_test
    engine: ENGINE
    func: "function main(row) return row.user ~= 'test' end"
  - name: strict
    engine: ENGINE
    on_error: deadletter
    func: "function main(row) if row.user == 'bad' then error('bad user') end return true end"
computed:
  - name: seen
    type: string
    engine: ENGINE
    func: |
      local sluice = require("sluice")
      local json = require("json")
      function main(row)
        local t = {}
        for _, k in ipairs({"i", "big", "f", "n", "s", "b", "nested", "missing"}) do
          local v = row[k]
          local d = type(v)
          if d == "number" then d = d .. ":" .. string.format("%.17g", v) end
          if d == "table" then d = d .. ":" .. json.encode(v) end
          if d == "string" or d == "boolean" then d = d .. ":" .. tostring(v) end
          t[#t + 1] = k .. "=" .. d
        end
        local keys = {}
        for k, v in pairs(row) do keys[#keys + 1] = k .. ":" .. type(v) end
        t[#t + 1] = table.concat(keys, ",")
        t[#t + 1] = "len=" .. #row
        if row.i ~= nil then row.i = row.i + 1 end
        row.written = 2.5
        row.whole = 3.0
        row.tbl = {a = 1, b = {true, "x"}}
        row.s = nil
        sluice.delete(row, {"drop1", "absent"})
        t[#t + 1] = json.encode(row)
        t[#t + 1] = sluice.encode(row, {"nested"})
        return table.concat(t, " ")
      end
  - name: half
    type: float64
    engine: ENGINE
    on_error: null
    func: "function main(row) return row.i / 2 end"
  - name: fedge
    type: float64
    engine: ENGINE
    func: "function main(row) local i = row.i or 0 if row.f ~= nil then return row.f elseif i == 14 then return 2^70 elseif i == -3 then return -2^63 end return i + 0.25 end"
  - name: iedge
    type: int64
    engine: ENGINE
    on_error: null
    func: "function main(row) local i = row.i or 0 if i == 3 then return row.f elseif i == 2 then return 2^63 elseif i == 7 then return 2.5 elseif i == 14 then return -2^63 end return i * 1000000007 end"
  - name: positive
    type: int64
    engine: ENGINE
    on_error: drop
    func: "function main(row) if (row.i or 0) < 0 then error('negative') end return row.i or 0 end"
  - name: checked
    type: int32
    engine: ENGINE
    on_error: deadletter
    func: "function main(row) if row.i == 14 then error('unlucky') end return row.i or 0 end"
  - name: ts
    type: timestamp
    engine: ENGINE
    func: "function main(row) return 1700000000.5 end"
  - name: doc
    type: json
    engine: ENGINE
    nullable: true
    func: "function main(row) if row.i == 2 then return row end return nil end"
  - name: later
    type: string
    engine: ENGINE
    func: |
      local json = require("json")
      function main(row)
        return tostring(row.half) .. "|" .. tostring(row.checked) .. "|" .. tostring(row.ts) .. "|" .. type(row.doc) .. "|" .. json.encode(row)
      end
  - name: all
    type: json
    func: make://json
`

// columnsMixRows are rows of every kind: changing keys, every JSON kind,
// numbers beyond 2^53 and beyond int64, nulls, nested values, and the rows
// each filter and policy acts on.
var columnsMixRows = []string{
	`{"i":1,"big":9007199254740993,"f":1.5,"n":null,"s":"x","b":false,"nested":{"a":[1,null]},"user":"a","drop1":1}`,
	`{"i":2,"f":-0.0,"s":"é\"\\","user":"b","huge":123456789012345678901234567890}`,
	`{"user":"test","i":3}`,
	`{"i":-4,"user":"c"}`,
	`{"user":"bad","i":5}`,
	`{"i":13,"user":"d","b":true,"extra":[1,{"x":null}]}`,
	`{"user":"e"}`,
	`{"i":6,"f":1e300,"s":"","user":"f","drop1":"y","n":null}`,
	`{}`,
}

// TestColumnsMatchMaps: ProcessColumns (rows held by column, the script
// reading them through a lazy view) gives what Process gives for the same
// rows as maps: the rows kept with every field, the dead letters with their
// rows, the errors and every function's counters, on every engine.
func TestColumnsMatchMaps(t *testing.T) {
	for _, engine := range testEngines {
		t.Run(engine, func(t *testing.T) {
			yaml := strings.ReplaceAll(columnsMixConfig, "ENGINE", engine)
			byMaps, byColumns := newProcessor(t, yaml, Options{}), newProcessor(t, yaml, Options{})
			if !byColumns.Columnar() {
				t.Fatal("the processor is not columnar")
			}
			ctx := context.Background()
			want, werr := byMaps.Process(ctx, rowsOf(t, columnsMixRows...))
			cb := columnsOf(rowsOf(t, columnsMixRows...))
			got, gerr := byColumns.ProcessColumns(ctx, cb)
			if werr != nil || gerr != nil {
				t.Fatal(werr, gerr)
			}
			if g, w := rowsJSON(t, cb.Rows()), rowsJSON(t, want.Rows); g != w {
				t.Errorf("rows differ:\n%s", firstDifference(g, w))
			}
			if len(got.Kept) != len(want.Rows) || len(cb.Lines) != len(got.Kept) {
				t.Errorf("kept %v, lines %v, for %d rows", got.Kept, cb.Lines, len(want.Rows))
			}
			for k, i := range got.Kept {
				if cb.Lines[k] != i+1 {
					t.Errorf("row %d (input %d) has line %d", k, i, cb.Lines[k])
				}
			}
			if g, w := deadJSON(t, got.DeadLetters), deadJSON(t, want.DeadLetters); g != w {
				t.Errorf("dead letters differ:\n%s", firstDifference(g, w))
			}
			if len(got.DeadLetterRows) != 2 || got.DeadLetterRows[0] != 4 || got.DeadLetterRows[1] != 5 {
				t.Errorf("dead letter rows %v, want [4 5]", got.DeadLetterRows)
			}
			if g, w := fmt.Sprint(got.Errors), fmt.Sprint(want.Errors); g != w {
				t.Errorf("errors by column\n%s\nas maps\n%s", g, w)
			}
			if g, w := byColumns.Stats(), byMaps.Stats(); !reflect.DeepEqual(g, w) {
				t.Errorf("stats by column\n%+v\nas maps\n%+v", g, w)
			}
			if len(want.Rows) != 5 || len(want.DeadLetters) != 2 {
				t.Errorf("the mix kept %d rows and %d dead letters, want 5 and 2", len(want.Rows), len(want.DeadLetters))
			}
		})
	}
}

// TestColumnsReject: a reject stops ProcessColumns with the error Process
// gives, naming the input row, and leaves the batch's rows in place.
func TestColumnsReject(t *testing.T) {
	for _, engine := range testEngines {
		t.Run(engine, func(t *testing.T) {
			yaml := `
filters:
  - {name: f, engine: ` + engine + `, func: "function main(row) return row.n ~= 0 end"}
computed:
  - {name: c, type: int64, engine: ` + engine + `, on_error: reject, func: "function main(row) if row.n == 3 then error('three') end return row.n end"}
`
			lines := []string{`{"n":1}`, `{"n":0}`, `{"n":3}`, `{"n":4}`}
			_, werr := newProcessor(t, yaml, Options{}).Process(context.Background(), rowsOf(t, lines...))
			cb := columnsOf(rowsOf(t, lines...))
			_, gerr := newProcessor(t, yaml, Options{}).ProcessColumns(context.Background(), cb)
			var ce *Error
			if !errors.Is(gerr, ErrRejected) || !errors.As(gerr, &ce) || ce.Row != 2 {
				t.Fatalf("ProcessColumns: %v, want a reject of row 2", gerr)
			}
			if werr == nil || gerr.Error() != werr.Error() {
				t.Errorf("by column: %v\nas maps:   %v", gerr, werr)
			}
			if cb.Len != 4 {
				t.Errorf("the rejected batch has %d rows, want its 4", cb.Len)
			}
		})
	}
}

func rowsJSON(t *testing.T, rows []map[string]any) string {
	t.Helper()
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(encode(t, r) + "\n")
	}
	return b.String()
}

func deadJSON(t *testing.T, dls []DeadLetter) string {
	t.Helper()
	var b strings.Builder
	for _, d := range dls {
		fmt.Fprintf(&b, "%s %v %s %s %q %s\n", d.Column, d.Filter, d.Loader, d.Source, d.Error, encode(t, d.Row))
	}
	return b.String()
}

// firstDifference shows where by-column output got and map output want
// first differ, with some context.
func firstDifference(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(i-150, 0)
	return fmt.Sprintf("by column: ...%s...\nas maps:   ...%s...", got[from:min(i+150, len(got))], want[from:min(i+150, len(want))])
}

// BenchmarkLuaColumn is the ingest benchmark's one Lua column (sluice
// bench ingest, case lua: score * 2) on batches of 1000 ten-field rows, as
// maps (Process) and held by column (ProcessColumns), on every engine. It
// reports rows per CPU-second of the process.
func BenchmarkLuaColumn(b *testing.B) {
	var lines []string
	for i := range 1000 {
		lines = append(lines, fmt.Sprintf(`{"time":"2024-05-01T00:00:%02d.%03dZ","user":"u%d","action":"view","country":"SG","device":"web","amount":%d.5,"score":%d.5,"count":%d,"session":%d,"ok":true}`,
			i%60, i, i%10, i%500, i%97, i%13, i/7))
	}
	for _, engine := range testEngines {
		yaml := `
computed:
  - name: score2
    type: float64
    engine: ` + engine + `
    func: "function main(row) return row.score * 2 end"
`
		b.Run(engine+"/maps", func(b *testing.B) {
			p := newProcessor(b, yaml, Options{})
			base := rowsOf(b, lines...)
			rows := make([]map[string]any, len(base))
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				for i, r := range base {
					rows[i] = maps.Clone(r) // what a decoder makes per row
				}
				if out, err := p.Process(context.Background(), rows); err != nil || len(out.Errors) > 0 {
					b.Fatal(err, out.Errors)
				}
			}
			b.ReportMetric(float64(b.N*len(lines))/(processCPU()-cpu0).Seconds(), "rows/cpu-s")
		})
		b.Run(engine+"/columns", func(b *testing.B) {
			p := newProcessor(b, yaml, Options{})
			cb := columnsOf(rowsOf(b, lines...))
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				if out, err := p.ProcessColumns(context.Background(), cb); err != nil || len(out.Errors) > 0 {
					b.Fatal(err, out.Errors)
				}
			}
			b.ReportMetric(float64(b.N*len(lines))/(processCPU()-cpu0).Seconds(), "rows/cpu-s")
		})
	}
}
