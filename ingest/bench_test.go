package ingest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/colbatch"
)

// tenFieldRows is the ingest benchmark's row shape: a timestamp, four
// strings, two floats, two ints and a bool.
func tenFieldRows(n int) []byte {
	var buf bytes.Buffer
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for k := 0; k < n; k++ {
		fmt.Fprintf(&buf, `{"time":"%s","user":"u%d","action":"view","country":"SG","device":"web","amount":%d.%02d,"score":%d.5,"count":%d,"session":%d,"ok":%t}`+"\n",
			base.Add(time.Duration(k)*37*time.Millisecond).Format(time.RFC3339Nano), k%1000, k%500, k%100, k%97, k%13, k/7, k%2 == 0)
	}
	return buf.Bytes()
}

// BenchmarkDecodeNDJSON decodes batches of 1000 ten-field rows.
func BenchmarkDecodeNDJSON(b *testing.B) {
	data := tenFieldRows(1000)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Decode(bytes.NewReader(data), DecodeOptions{}, func([]Row, []int) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkDecodeColumns is BenchmarkDecodeNDJSON by column (what a table
// without computed columns or filters takes).
func BenchmarkDecodeColumns(b *testing.B) {
	data := tenFieldRows(1000)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := DecodeColumns(bytes.NewReader(data), DecodeOptions{}, func(*colbatch.Batch) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "rows/s")
}
