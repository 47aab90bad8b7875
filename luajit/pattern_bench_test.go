//go:build luajit && cgo

package luajit

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// BenchmarkPatterns runs string.find, match, gmatch and gsub (host.c's,
// which a timeout can stop) beside LuaJIT's own (reached through
// require("string")) on a log line, in ns per row: the best wall time of
// b.N batches of 256 rows, and the process CPU time per row over all of them.
//
//	go test -tags luajit -run XXX -bench Patterns -benchtime 300x ./luajit/
func BenchmarkPatterns(b *testing.B) {
	const line = `2024-05-01T12:34:56Z host=web-17 level=warn msg="slow request" path=/api/v1/items?id=42 took=1234ms`
	for _, w := range []struct{ name, body string }{
		{"find", `local a, b, k, v = S.find(s, "(%w+)=(%d+)ms") return a`},
		{"match", `local y, m, d = S.match(s, "^(%d+)-(%d+)-(%d+)T") return #y`},
		{"gmatch", `local n = 0 for k, v in S.gmatch(s, "(%w+)=([^%s]+)") do n = n + 1 end return n`},
		{"gsub", `local r, n = S.gsub(s, "%d+", "<%0>") return n`},
		{"frontier", `local r, n = S.gsub(s, "%f[%w]%w+", string.upper) return n`},
		{"backtrack", `return S.find(s, "^.-level=(.-) .*took=(%d+)")`},
	} {
		for _, lib := range []struct{ name, get string }{{"sluice", `string`}, {"luajit", `require("string")`}} {
			code := "local S = " + lib.get + "\nlocal s = [[" + line + "]]\nfunction main(row) " + w.body + " end"
			b.Run(w.name+"/"+lib.name, func(b *testing.B) {
				e, _ := New()
				defer e.Close()
				s, err := e.Load("bench", code, Config{Allow: []string{"require"}})
				if err != nil {
					b.Fatal(err)
				}
				rows := make([]map[string]any, 256)
				for i := range rows {
					rows[i] = map[string]any{}
				}
				out, errs := make([]any, 256), make([]error, 256)
				best := time.Duration(1 << 62)
				cpu0 := cpuTime()
				for range b.N {
					start := time.Now()
					s.Values(context.Background(), rows, out, errs)
					if errs[0] != nil {
						b.Fatal(errs[0])
					}
					best = min(best, time.Since(start))
				}
				b.ReportMetric(float64(best.Nanoseconds())/256, "ns/row")
				b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*256), "cpu-ns/row")
			})
		}
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
