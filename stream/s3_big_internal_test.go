package stream

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/table"
)

// bigObject is NDJSON of at least size bytes: rows with ids from 0, n of
// them.
func bigObject(size int) (data []byte, n int) {
	var b bytes.Buffer
	b.Grow(size + 256)
	for ; b.Len() < size; n++ {
		fmt.Fprintf(&b, `{"ts":"2026-11-29T10:%02d:%02d.%06dZ","id":%d,"user":"u%d","path":"/api/v1/items/%d","status":200}`+"\n",
			n/60%60, n%60, n%1000000, n, n%50, n%1000)
	}
	return b.Bytes(), n
}

// bigTarget opens a store with an inferred table big and its dead letters.
func bigTarget(t *testing.T, dir string) (Target, func()) {
	t.Helper()
	s, err := table.Open(dir, table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := s.Table(table.Config{Name: "big", SortBy: "ts", HashBy: "user"})
	if err != nil {
		t.Fatal(err)
	}
	dl, err := s.Table(table.Config{Name: "big_deadletter", SortBy: "time"})
	if err != nil {
		t.Fatal(err)
	}
	return Target{Store: s, Table: tb, DeadLetters: dl, Policy: ingest.Reject}, func() { s.Close() }
}

// countIDs returns how many rows tb holds and the sum of their ids.
func countIDs(t *testing.T, tb *table.Table) (rows, sum int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := tb.Query(ctx, table.Query{}, func(r table.Row) error {
		rows++
		if id, ok := r["id"].(int64); ok {
			sum += id
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows, sum
}

// heapPeak samples the heap in use every few milliseconds until stop is
// called, which returns the highest sample.
func heapPeak() (stop func() uint64) {
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak }
}

// heapInuse is the heap in use after a collection.
// loadedS3 is an S3 source of tableName on target, its computed columns'
// scripts loaded, as Run would have it before its first listing.
func loadedS3(tb testing.TB, target Target, tableName string, opts S3Options) *S3 {
	tb.Helper()
	src, err := NewS3(target, tableName, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if err := src.loadDone(); err != nil {
		tb.Fatal(err)
	}
	return src
}

func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestS3LargeObjectsStreamed: a 40 MB NDJSON object and a gzip object of
// 40 MB of NDJSON, each over max_object_bytes, are each ingested once with
// every row, the heap growing by far less than an object while they are
// read, and a restarted source on the same store stores neither again.
func TestS3LargeObjectsStreamed(t *testing.T) {
	opts, bucket := s3Bucket(t)
	opts.Prefix = "big/"
	size := 40 << 20
	if raceEnabled {
		// Under -race the heap bound is not asserted (below), and what is
		// left (streamed above max_object_bytes in many batches, gzip on
		// the way, once across a restart) holds at a tenth of the size,
		// still four times the bound: 40 MB objects took 70-150 s of the
		// race phase's longest package. scripts/test's memory-bound phase
		// runs the test at full size without -race.
		size = 4 << 20
	}
	var want, wantSum int64
	for _, key := range []string{"big/plain.ndjson", "big/packed.ndjson.gz"} {
		data, n := bigObject(size)
		if key == "big/packed.ndjson.gz" {
			var z bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&z, gzip.BestSpeed)
			zw.Write(data)
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			data = z.Bytes()
		}
		putObject(t, bucket, key, data)
		want += int64(n)
		wantSum += int64(n) * int64(n-1) / 2
	}
	dir := t.TempDir()
	target, closeStore := bigTarget(t, dir)
	target.MaxMessageBytes = 1 << 20 // the in-memory bound: both objects are far over it
	src := loadedS3(t, target, "big", opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	base := heapInuse()
	stop := heapPeak()
	err := src.listOnce(ctx)
	peak := stop()
	if err != nil {
		t.Fatal(err)
	}
	growth := int64(peak) - int64(base)
	t.Logf("heap in use: %d MB before, peak %d MB while two objects of %d MB were ingested", base>>20, peak>>20, size>>20)
	// An object held whole would be 40 MB of bytes alone (and far more as
	// decoded rows): the bound is three quarters of it. Under -race the
	// package's other tests leave goroutines and heap behind and the race
	// detector slows the collector (a CI run saw 13 MB before and a 55 MB
	// peak where the test alone peaks at 15 MB): the bound is held by
	// scripts/test's run of this test alone, without -race.
	if growth > int64(size)*3/4 && !raceEnabled {
		t.Fatalf("heap grew by %d MB while ingesting objects of %d MB: not bounded by the decoder's buffers", growth>>20, size>>20)
	}
	if rows, sum := countIDs(t, target.Table); rows != want || sum != wantSum {
		t.Fatalf("stored %d rows (id sum %d), want %d (id sum %d)", rows, sum, want, wantSum)
	}
	if dead, _ := countIDs(t, target.DeadLetters); dead != 0 {
		t.Fatalf("%d dead letters, want none", dead)
	}
	closeStore()

	target, closeStore = bigTarget(t, dir)
	defer closeStore()
	target.MaxMessageBytes = 1 << 20
	src = loadedS3(t, target, "big", opts)
	if err := src.listOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if rows, _ := countIDs(t, target.Table); rows != want {
		t.Fatalf("after a restart the table holds %d rows, want %d (stored again?)", rows, want)
	}
}

// TestS3LargeObjectCorruptEnd: a streamed object whose last line is corrupt
// stores none of its rows (several batches of them were staged already)
// and goes to the dead letters with its first bytes, the error naming the
// line; it is recorded, so the next listing does not read it again.
func TestS3LargeObjectCorruptEnd(t *testing.T) {
	opts, bucket := s3Bucket(t)
	opts.Prefix = "big/"
	data, n := bigObject(4 << 20)
	data = append(data, `{"id":`+"\n"...)
	putObject(t, bucket, "big/corrupt.ndjson", data)
	target, closeStore := bigTarget(t, t.TempDir())
	defer closeStore()
	target.MaxMessageBytes = 1 << 20
	src := loadedS3(t, target, "big", opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for range 2 {
		if err := src.listOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if rows, _ := countIDs(t, target.Table); rows != 0 {
		t.Fatalf("%d rows stored of an object with a corrupt last line, want none", rows)
	}
	var dead []table.Row
	err := target.DeadLetters.Query(ctx, table.Query{}, func(r table.Row) error {
		c := table.Row{}
		for k, v := range r {
			c[k] = v
		}
		dead = append(dead, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantLine := fmt.Sprintf("line %d", n+1)
	if len(dead) != 1 || dead[0]["origin"] != "s3://warehouse/big/corrupt.ndjson" || !bytes.Contains([]byte(dead[0]["error"].(string)), []byte(wantLine)) {
		t.Fatalf("dead letters = %v, want one for s3://warehouse/big/corrupt.ndjson naming %s", dead, wantLine)
	}
	if f, _ := dead[0]["format"].(string); f != "ndjson"+FormatTruncated {
		t.Fatalf("dead letter format %q, want ndjson%s (its first bytes only)", f, FormatTruncated)
	}
	if p, err := target.Store.Position(S3PositionName("big", opts.Bucket, "big/corrupt.ndjson")); err != nil || len(p) == 0 {
		t.Fatalf("the dead-lettered object is not recorded: %q, %v", p, err)
	}
}

// TestS3StreamedMatchesInMemory: objects streamed through a Stage store
// what the same objects held in memory store (rows with their source
// columns, computed columns, filters, dead letters of a deadletter column,
// of bad lines under skip, of a bad line, a reject column and a value that
// does not fit under reject), gzip and CSV included.
func TestS3StreamedMatchesInMemory(t *testing.T) {
	opts, bucket := s3Bucket(t)
	opts.Prefix = "in/"
	putObject(t, bucket, "in/a.ndjson", []byte(`{"ts":"2026-01-01T00:00:00Z","user":"a","n":1,"x":1.5}`+"\n"+
		`{"ts":"2026-01-01T00:00:01Z","user":"c","n":2}`+"\n"+`{"ts":"2026-01-01T00:00:02Z","user":"e","n":3,"nested":{"a":[1]}}`+"\n"))
	putObject(t, bucket, "in/b.ndjson", []byte(`{"ts":"2026-01-01T00:00:03Z","user":"b","n":4}`+"\n{broken\n"+`{"ts":"2026-01-01T00:00:04Z","user":"d","n":5}`+"\n"))
	putObject(t, bucket, "in/c.ndjson", []byte(`{"ts":"2026-01-01T00:00:05Z","user":"f","n":6}`+"\n"+`{"ts":"2026-01-01T00:00:06Z","user":"k","n":7}`+"\n"))
	putObject(t, bucket, "in/d.csv.gz", gzipped(t, "ts,user,n\n2026-01-01T00:00:07Z,g,8\n2026-01-01T00:00:08Z,h,9\n"))
	putObject(t, bucket, "in/e.ndjson", []byte(`{"ts":"2026-01-01T00:00:09Z","user":"i","n":"not a number"}`+"\n"))
	computed := `
filters:
  - {name: not_c, func: "function main(row) return row.user ~= 'c' end"}
computed:
  - name: tag
    type: string
    on_error: deadletter
    func: "function main(row) if row.user == 'e' then error('no e') end return row.user .. ':' .. tostring(row.n) end"
  - name: strict
    type: int64
    on_error: reject
    func: "function main(row) if row.user == 'k' then error('no k') end return 1 end"
`
	stored := func(policy ingest.Policy, streamAbove int64) (rows, dead []string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := table.Open(t.TempDir(), table.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		tb, err := s.Table(table.Config{Name: "events", SortBy: "ts", Columns: []table.Column{{Name: "ts", Type: table.Timestamp},
			{Name: "user", Type: table.String}, {Name: "n", Type: table.Int64}, {Name: "x", Type: table.Float64}, {Name: "nested", Type: table.JSON},
			{Name: "tag", Type: table.String}, {Name: "strict", Type: table.Int64}}})
		if err != nil {
			t.Fatal(err)
		}
		dl, err := s.Table(table.Config{Name: "events_deadletter", SortBy: "time"})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := compute.ParseConfig([]byte(computed))
		if err != nil {
			t.Fatal(err)
		}
		p, err := compute.New(ctx, cfg, compute.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		target := Target{Store: s, Table: tb, DeadLetters: dl, Policy: policy, SourceColumns: true, Compute: p,
			Schema: map[string]compute.Type{"ts": compute.Timestamp, "user": compute.String, "n": compute.Int64}}
		o := opts
		o.streamAbove = streamAbove
		src := loadedS3(t, target, "events", o)
		if err := src.listOnce(ctx); err != nil {
			t.Fatal(err)
		}
		text := func(tb *table.Table) []string {
			var out []string
			var cols []string // every column, the hidden source columns too
			for _, c := range tb.Schema() {
				cols = append(cols, c.Name)
			}
			err := tb.Query(ctx, table.Query{Columns: cols}, func(r table.Row) error {
				delete(r, "time") // when the dead letter was made
				out = append(out, fmt.Sprint(r))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(out)
			return out
		}
		return text(tb), text(dl)
	}
	for _, policy := range []ingest.Policy{ingest.Skip, ingest.Reject} {
		rows, dead := stored(policy, 0)
		streamedRows, streamedDead := stored(policy, 1)
		if len(rows) == 0 || len(dead) == 0 {
			t.Fatalf("policy %v: %d rows and %d dead letters in memory: the objects test nothing", policy, len(rows), len(dead))
		}
		if !slices.Equal(rows, streamedRows) {
			t.Errorf("policy %v: rows in memory:\n%s\nstreamed:\n%s", policy, strings.Join(rows, "\n"), strings.Join(streamedRows, "\n"))
		}
		if !slices.Equal(dead, streamedDead) {
			t.Errorf("policy %v: dead letters in memory:\n%s\nstreamed:\n%s", policy, strings.Join(dead, "\n"), strings.Join(streamedDead, "\n"))
		}
	}
}
