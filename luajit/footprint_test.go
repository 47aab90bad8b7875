//go:build luajit && cgo

package luajit

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
)

func rssKB(tb testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		tb.Skip("no /proc/self/statm")
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize()) / 1024
}

// BenchmarkVMFootprint reports the resident memory one more VM costs (its
// Lua state with the host module and a small script, and its batch
// memory after a 256-row batch of 19-field rows), from 100 VMs alive at once.
//
//	go test -tags luajit -run XXX -bench VMFootprint -benchtime 1x ./luajit/
func BenchmarkVMFootprint(b *testing.B) {
	const n = 100
	s := load(b, `local json = require("json") function main(row) return json.encode(row) end`, Config{PoolSize: n})
	rows := make([]map[string]any, 256)
	for i := range rows {
		rows[i] = decodeRow(b, `{"customKey1":12,"time":12999,"customKey2":"Key2Val","city":"SG","customKey3":999,"android":"yes","customKey15":5555,"uuid":12999,"customKey12":"Key2Val","country":"SG","customKey13":999,"ios":"no","customKey25":5555,"newuuid":12999,"customKey22":"Key2Val","region":"SG","customKey23":999,"device":"ios","date":"03031999"}`)
	}
	out, errs := make([]any, len(rows)), make([]error, len(rows))
	before := rssKB(b)
	vms := make([]*vm, 0, n)
	for range n {
		v, err := s.acquire(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if err := v.run(context.Background(), rows, out, errs); err != nil || errs[0] != nil {
			b.Fatal(err, errs[0])
		}
		vms = append(vms, v)
	}
	after := rssKB(b)
	for _, v := range vms {
		s.release(v)
	}
	b.ReportMetric(float64(after-before)/n, "KB/VM")
}
