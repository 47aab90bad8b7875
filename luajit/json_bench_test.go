//go:build luajit && cgo

package luajit

import (
	"context"
	"testing"
	"time"
)

const probeEvent = `{"customKey1":12,"time":12999,"customKey2":"Key2Val","city":"SG","customKey3":999,"android":"yes","customKey15":5555,"uuid":12999,"customKey12":"Key2Val","country":"SG","customKey13":999,"ios":"no","customKey25":5555,"newuuid":12999,"customKey22":"Key2Val","region":"SG","customKey23":999,"device":"ios","date":"03031999","nested":{"a":[1,2,3,{"b":"c\n"}]}}`

// BenchmarkJSON compares json.decode and json.encode (both in C, host.c)
// with Debian's lua-cjson on a 20-field object with a nested array, best
// of b.N batches of 256 rows, in ns per row. lua-cjson does not sort keys
// and writes numbers and some characters differently from Go, so it could
// not replace json.encode anyway; the cjson variants are skipped when
// lua-cjson is not installed (apt-get install lua-cjson).
//
//	go test -tags luajit -run XXX -bench 'JSON$' -benchtime 200x ./luajit/
func BenchmarkJSON(b *testing.B) {
	for _, v := range []struct{ name, code string }{
		{"decode/sluice", `local json = require("json") function main(row) local t = json.decode(row.j) return 1 end`},
		{"decode/cjson", `local cjson = require("cjson") function main(row) local t = cjson.decode(row.j) return 1 end`},
		{"encode/sluice", `local json = require("json") local t = json.decode(row_j) function main(row) return #json.encode(t) end`},
		{"encode/cjson", `local cjson = require("cjson") local t = cjson.decode(row_j) function main(row) return #cjson.encode(t) end`},
	} {
		code := "row_j = [[" + probeEvent + "]]\n" + v.code
		b.Run(v.name, func(b *testing.B) {
			e, _ := New()
			defer e.Close()
			s, err := e.Load("bench", code, Config{Allow: []string{"require"}})
			if err != nil {
				b.Skipf("%s: %v", v.name, err)
			}
			rows := make([]map[string]any, 256)
			for i := range rows {
				rows[i] = map[string]any{"j": probeEvent}
			}
			out, errs := make([]any, 256), make([]error, 256)
			best := time.Duration(1 << 62)
			for range b.N {
				start := time.Now()
				s.Values(context.Background(), rows, out, errs)
				if errs[0] != nil {
					b.Fatal(errs[0])
				}
				best = min(best, time.Since(start))
			}
			b.ReportMetric(float64(best.Nanoseconds())/256, "ns/row")
		})
	}
}
