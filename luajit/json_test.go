//go:build luajit && cgo

package luajit

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/jsonw"
)

// randomValue makes JSON-able Go values with what Lua keeps exactly:
// integers within 2^53, any finite float, strings with escapes, invalid
// UTF-8 and U+2028, non-empty arrays (an empty Lua table is an object).
func randomValue(r *rand.Rand, depth int) any {
	switch k := r.IntN(8); {
	case k == 0 && depth < 3:
		m := map[string]any{}
		for range r.IntN(6) {
			m[randomString(r)] = randomValue(r, depth+1)
		}
		return m
	case k == 1 && depth < 3:
		a := make([]any, 1+r.IntN(4))
		for i := range a {
			a[i] = randomValue(r, depth+1)
		}
		return a
	case k == 2:
		return randomString(r)
	case k == 3:
		return float64(r.Int64N(1<<53) - 1<<52)
	case k == 4:
		for {
			f := math.Float64frombits(r.Uint64())
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				return f
			}
		}
	case k == 5:
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
	case k == 6:
		return r.IntN(2) == 0
	}
	return nil
}

func randomString(r *rand.Rand) string {
	parts := []string{"a", "key", "é", "\u2028", "\"", "\\", "\n", "\x01", "\xff", "日本", "<>&", " ", "0", "Z"}
	var b strings.Builder
	for range r.IntN(5) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

// TestJSONMatchesJSONW: json.decode then json.encode in Lua gives the bytes
// internal/jsonw writes for the same value (the encoder in C for tables,
// the number formatting, the escaping), and so does json.encode of single
// numbers read from a row and of rows of numbers (laid out without their
// text: vm.go's noText).
func TestJSONMatchesJSONW(t *testing.T) {
	s := load(t, `local json = require("json")
function main(row)
  if row.f then return json.encode(row.f) .. " " .. json.encode(row) end
  if row.n then return json.encode(row) end
  return json.encode(json.decode(row.j))
end`, Config{})
	r := rand.New(rand.NewPCG(1, 2))
	var rows []map[string]any
	var want []string
	for range 500 {
		v := randomValue(r, 0)
		if v == nil {
			continue
		}
		b, err := jsonw.AppendValue(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		// what Lua decodes is what Go decodes (an invalid byte written as
		// \ufffd comes back as U+FFFD, then written as is)
		var back any
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		w, err := jsonw.AppendValue(nil, back)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, map[string]any{"j": string(b)})
		want = append(want, string(w))
		f := randomValue(r, 10)
		if x, ok := f.(float64); ok {
			b, _ := jsonw.AppendFloat(nil, x, 64)
			rows = append(rows, map[string]any{"f": x})
			want = append(want, string(b)+` {"f":`+string(b)+`}`)
		}
		// an integer cell as the row's JSON: its digits, all of them
		// beyond 2^53
		n := r.Int64() >> r.IntN(64)
		if r.IntN(2) == 0 {
			n = -n
		}
		rows = append(rows, map[string]any{"n": n})
		want = append(want, fmt.Sprintf(`{"n":%d}`, n))
	}
	out, errs := run(t, s, rows...)
	bad := 0
	for i := range rows {
		if errs[i] != nil || out[i] != want[i] {
			bad++
			if bad <= 5 {
				t.Errorf("row %d (%v):\n got %v %v\nwant %s", i, rows[i], out[i], errs[i], want[i])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d differ", bad, len(rows))
	}
	t.Logf("%d values compared", len(rows))
}
