package ingest

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/colbatch"
)

// debeziumMessages are tenFieldRows(n) as Debezium JSON change events of
// PostgreSQL's connector: updates (before and after images, as with
// REPLICA IDENTITY FULL) with the source block's usual fields; wrapped adds
// the JSON converter's schema/payload wrapper (with a short schema: a real
// one is larger still, and skipped the same way).
func debeziumMessages(n int, wrapped bool) [][]byte {
	rows := bytes.Split(bytes.TrimSuffix(tenFieldRows(n), []byte("\n")), []byte("\n"))
	msgs := make([][]byte, len(rows))
	for i, r := range rows {
		ev := fmt.Sprintf(`{"before":%s,"after":%s,"source":{"version":"2.7.0.Final","connector":"postgresql","name":"dbserver1","ts_ms":%d,"snapshot":"false","db":"inventory","sequence":"[null,\"%d\"]","schema":"public","table":"events","txId":%d,"lsn":%d,"xmin":null},"op":"u","ts_ms":%d,"transaction":null}`,
			r, r, 1700000000000+i, 24023128+i*64, 780+i, 24023128+i*64, 1700000000100+i)
		if wrapped {
			ev = `{"schema":{"type":"struct","fields":[{"type":"struct","fields":[],"optional":true,"field":"before"},{"type":"struct","fields":[],"optional":true,"field":"after"}],"optional":false,"name":"dbserver1.public.events.Envelope"},"payload":` + ev + `}`
		}
		msgs[i] = []byte(ev)
	}
	return msgs
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkChangesDecode compares a batch of 1000 messages decoded by column
// as plain NDJSON rows with the same rows as Debezium JSON update events
// (the envelope read, after handed to the same decoder), in rows per
// CPU-second of the process (garbage collection included): docs/perf/upserts-decode.md.
func BenchmarkChangesDecode(b *testing.B) {
	const n = 1000
	plain := bytes.Split(bytes.TrimSuffix(tenFieldRows(n), []byte("\n")), []byte("\n"))
	for _, tc := range []struct {
		name     string
		msgs     [][]byte
		debezium bool
	}{
		{"ndjson", plain, false},
		{"debezium", debeziumMessages(n, false), true},
		{"debezium-wrapped", debeziumMessages(n, true), true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			size := 0
			for _, m := range tc.msgs {
				size += len(m) + 1
			}
			joined := make([]byte, 0, size)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			start := cpuTime(b)
			for b.Loop() {
				joined = joined[:0]
				for _, m := range tc.msgs {
					row := m
					if tc.debezium {
						var err error
						if row, _, err = DebeziumJSON(m, nil, ""); err != nil {
							b.Fatal(err)
						}
					}
					joined = append(append(joined, row...), '\n')
				}
				rows := 0
				if _, err := DecodeColumns(bytes.NewReader(joined), DecodeOptions{}, func(cb *colbatch.Batch) error { rows += cb.Len; return nil }); err != nil {
					b.Fatal(err)
				}
				if rows != n {
					b.Fatalf("%d rows, want %d", rows, n)
				}
			}
			b.ReportMetric(float64(b.N)*n/(cpuTime(b)-start).Seconds(), "rows/cpu-s")
		})
	}
}
