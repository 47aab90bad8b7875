package table

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestParallelScanSameAsInline: a query over many blocks answers the same
// rows in the same order whether its blocks are decoded inline (one P) or
// by workers (eight), with and without predicates and limits, including a
// limit that falls inside a block and a corrupt-free early stop.
func TestParallelScanSameAsInline(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "scan", HashBy: "user", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		if err := tb.Append(ctx, benchRows(i, 500, 37)); err != nil {
			t.Fatal(err)
		}
	}
	queries := map[string]Query{
		"all":        {},
		"range":      {From: t0.Add(3 * time.Second), To: t0.Add(25 * time.Second)},
		"where":      {Where: []Predicate{{Column: "latency", Op: Lt, Value: int64(20)}}},
		"keys":       {HashIn: []any{"user-3", "user-30", "user-17"}},
		"limit":      {Limit: 1234},
		"limit-one":  {Limit: 1},
		"cols+limit": {Columns: []string{"n", "user"}, Limit: 5000, Where: []Predicate{{Column: "ok", Op: Eq, Value: true}}},
	}
	run := func(procs int, q Query) [][]any {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		var out [][]any
		err := tb.QueryValues(ctx, q, func(_ []Column, vals []any) error {
			out = append(out, append([]any(nil), vals...))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for name, q := range queries {
		inline, parallel := run(1, q), run(8, q)
		if len(inline) == 0 {
			t.Errorf("%s: no rows", name)
		}
		if !reflect.DeepEqual(inline, parallel) {
			t.Errorf("%s: %d rows inline, %d in parallel, or in another order", name, len(inline), len(parallel))
		}
		if q.Limit > 0 && len(parallel) != q.Limit {
			t.Errorf("%s: %d rows, limit %d", name, len(parallel), q.Limit)
		}
	}
	// An emit error stops the scan and is returned, workers and all.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	stop := fmt.Errorf("enough")
	n := 0
	err = tb.QueryValues(ctx, Query{}, func([]Column, []any) error {
		if n++; n == 777 {
			return stop
		}
		return nil
	})
	if err != stop || n != 777 {
		t.Errorf("emit error: %v after %d rows", err, n)
	}
}

// TestQueryEncodedSameAsValues: an encoded query (rows encoded on the
// workers, chunks written in order) writes the same bytes as QueryValues'
// rows encoded one by one on the caller's goroutine, inline (one P) and on
// workers (eight), under predicates, keys and limits (one inside a block);
// an encode error writes the rows before its row and is returned, as an
// emit error is; a write error ends the query.
func TestQueryEncodedSameAsValues(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "scan", HashBy: "user", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		if err := tb.Append(ctx, benchRows(i, 500, 37)); err != nil {
			t.Fatal(err)
		}
	}
	// The encoders fail on the row whose n is badN in the projection
	// (user, n) of the bad- queries, leaving a partial row behind.
	badN := int64(12345)
	errBad := errors.New("bad row")
	encode := func(buf []byte, vals []any) ([]byte, error) {
		for i, v := range vals {
			if len(vals) == 2 && i == 1 && v == badN {
				return append(buf, "partial"...), errBad
			}
			buf = fmt.Appendf(buf, "%v|", v)
		}
		return append(buf, '\n'), nil
	}
	queries := map[string]Query{
		"all":        {},
		"range":      {From: t0.Add(3 * time.Second), To: t0.Add(25 * time.Second)},
		"where":      {Where: []Predicate{{Column: "latency", Op: Lt, Value: int64(20)}}},
		"keys":       {HashIn: []any{"user-3", "user-30", "user-17"}},
		"limit":      {Limit: 1234},
		"limit-one":  {Limit: 1},
		"cols+limit": {Columns: []string{"n", "user"}, Limit: 5000, Where: []Predicate{{Column: "ok", Op: Eq, Value: true}}},
		"bad-row":    {Columns: []string{"user", "n"}},
		"bad-after":  {Columns: []string{"user", "n"}, Limit: 20000},
	}
	serial := func(q Query) (string, int, error) {
		var out []byte
		rows := 0
		err := tb.QueryValues(ctx, q, func(_ []Column, vals []any) error {
			line, err := encode(nil, vals)
			if err != nil {
				return err
			}
			out = append(out, line...)
			rows++
			return nil
		})
		return string(out), rows, err
	}
	encoded := func(procs int, q Query) (string, int, error) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		var out []byte
		rows := 0
		err := tb.QueryEncoded(ctx, q, encode, func(chunk []byte, n int) error {
			if n == 0 || len(chunk) == 0 {
				t.Errorf("empty chunk written: %d rows, %d bytes", n, len(chunk))
			}
			out = append(out, chunk...)
			rows += n
			return nil
		})
		return string(out), rows, err
	}
	for name, q := range queries {
		want, wantRows, wantErr := serial(q)
		if wantRows == 0 {
			t.Errorf("%s: no rows", name)
		}
		for _, procs := range []int{1, 8} {
			got, rows, err := encoded(procs, q)
			if got != want || rows != wantRows || err != wantErr {
				t.Errorf("%s, %d Ps: %d rows, %d bytes, error %v; QueryValues: %d rows, %d bytes, error %v",
					name, procs, rows, len(got), err, wantRows, len(want), wantErr)
			}
		}
		if q.Limit > 0 && wantErr == nil && wantRows != q.Limit {
			t.Errorf("%s: %d rows, limit %d", name, wantRows, q.Limit)
		}
		if bad := strings.HasPrefix(name, "bad-"); bad != (wantErr == errBad) {
			t.Errorf("%s: error %v", name, wantErr)
		}
	}
	// A write error ends the query, workers and all.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	stop := errors.New("enough")
	writes := 0
	err = tb.QueryEncoded(ctx, Query{}, encode, func([]byte, int) error {
		if writes++; writes == 7 {
			return stop
		}
		return nil
	})
	if err != stop || writes != 7 {
		t.Errorf("write error: %v after %d writes", err, writes)
	}
}

// BenchmarkQueryRange streams a time range over every partition (64
// partitions, 400k rows of 10 columns in ~6,400 blocks): the query whose
// blocks workers decode in parallel. values emits the rows on the caller's
// goroutine (QueryValues, counting them); encoded writes each row as a line
// of text on the workers (QueryEncoded, as the server's NDJSON answer
// does) and the caller only counts the chunks' rows; blocks reads the
// same blocks block by block (QueryBlocksSeqs, as the cold tier's
// compaction does). Run with -cpu 1,2,4,8 to see it scale (GOMAXPROCS
// above the machine's cores shows contention, not speed: the rows per
// CPU-second should stay flat).
func BenchmarkQueryRange(b *testing.B) {
	ctx := context.Background()
	s := openStore(b, b.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "bench", HashBy: "user", SortBy: "ts"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		if err := tb.Append(ctx, benchRows(i, 4000, 64)); err != nil {
			b.Fatal(err)
		}
	}
	q := Query{From: t0, To: t0.Add(time.Hour)}
	b.Run("values", func(b *testing.B) {
		b.ReportAllocs()
		rows := 0
		cpu0 := cpuTime()
		for b.Loop() {
			if err := tb.QueryValues(ctx, q, func([]Column, []any) error { rows++; return nil }); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b, rows, cpu0)
	})
	b.Run("encoded", func(b *testing.B) {
		b.ReportAllocs()
		rows, bytes := 0, 0
		cpu0 := cpuTime()
		for b.Loop() {
			err := tb.QueryEncoded(ctx, q, appendTextRow, func(chunk []byte, n int) error {
				rows += n
				bytes += len(chunk)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b, rows, cpu0)
		b.SetBytes(int64(bytes / b.N))
	})
	b.Run("blocks", func(b *testing.B) {
		b.ReportAllocs()
		rows := 0
		cpu0 := cpuTime()
		for b.Loop() {
			err := tb.QueryBlocksSeqs(ctx, q, 0, 0, scanWorkers(), func(_ []Column, br *BlockRows) error {
				rows += len(br.Rows)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b, rows, cpu0)
	})
}

// appendTextRow writes a row as tab-separated text: the benchmark's
// stand-in for the server's NDJSON encoder (same kind of work per value).
func appendTextRow(buf []byte, vals []any) ([]byte, error) {
	for i, v := range vals {
		if i > 0 {
			buf = append(buf, '\t')
		}
		switch v := v.(type) {
		case nil:
			buf = append(buf, "null"...)
		case int64:
			buf = strconv.AppendInt(buf, v, 10)
		case float64:
			buf = strconv.AppendFloat(buf, v, 'g', -1, 64)
		case string:
			buf = strconv.AppendQuote(buf, v)
		case bool:
			buf = strconv.AppendBool(buf, v)
		case time.Time:
			buf = v.AppendFormat(buf, time.RFC3339Nano)
		default:
			return buf, fmt.Errorf("value %T", v)
		}
	}
	return append(buf, '\n'), nil
}
