package upserts

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/table"
)

// benchKeys is the number of distinct keys (SLUICE_BENCH_KEYS, default 1M;
// the docs' figures name the count they ran with).
func benchKeys(b *testing.B) int {
	if s := os.Getenv("SLUICE_BENCH_KEYS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1000 {
			b.Fatalf("SLUICE_BENCH_KEYS %q: want a count of at least 1000", s)
		}
		return n
	}
	return 1_000_000
}

const (
	batchRows  = 1000
	partitions = 6
	zipfS      = 1.1
)

// cpuSeconds is the process's user+system CPU time: the store's background
// work (flushes, compactions) counts, as it does on a node.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// changes makes batches of rows: with zipf nil the keys first..first+n-1
// once each, else n keys drawn from zipf, every 20th a delete. Each row
// carries a source position: the key's partition (its hash mod
// partitions) and that partition's next offset.
type changes struct {
	keys    int
	zipf    *rand.Zipf
	offsets [partitions]int64
	seq     int64
}

func (c *changes) batch(first int) []table.Row {
	rows := make([]table.Row, batchRows)
	for i := range rows {
		k := first + i
		if c.zipf != nil {
			k = int(c.zipf.Uint64())
		}
		c.seq++
		id := fmt.Sprintf("key-%08d", k)
		p := k % partitions
		c.offsets[p]++
		r := table.Row{
			"id": id, "region": "r" + strconv.Itoa(k%16), "v": c.seq, "note": "a change of a key in the benchmark",
			"ts":                     time.Unix(1_764_000_000+c.seq/1000, 0).UTC(),
			table.SourceBatchColumn:  fmt.Sprintf("kafka/state/%d/tid@%d-%d", p, c.offsets[p], c.offsets[p]+1),
			table.SourceOffsetColumn: c.offsets[p],
		}
		if c.zipf != nil && c.seq%20 == 0 {
			r[table.OperationColumn] = table.OperationDelete
		}
		rows[i] = r
	}
	return rows
}

// appendAll appends batches to tb and returns the rows per CPU-second.
func appendAll(b *testing.B, tb *table.Table, batches [][]table.Row) float64 {
	ctx := context.Background()
	cpu0 := cpuSeconds()
	for _, rows := range batches {
		if err := tb.Append(ctx, rows); err != nil {
			b.Fatal(err)
		}
	}
	return float64(len(batches)*batchRows) / (cpuSeconds() - cpu0)
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkUpserts loads benchKeys keys into a keyed table (key id) and an
// append-only one, then appends as many Zipf-skewed changes (s=1.1, one in
// 20 a delete) to each: rows per CPU-second of both, in the same run and
// process. Then a paced stream of 50,000 changes/s (a batch every 20 ms, as
// a consumer's poll) for 10 s into the keyed table, each batch's last
// change looked up until it is visible: change → visible p50/p99, from the
// change's arrival in the batch being filled to the lookup that sees it;
// and the same stream consumed as a Kafka source polls (polled: a batch
// takes what arrived meanwhile, up to 5000 changes). Last the time of a walk of the key index (KeyStates, what a member of a
// keyed cluster query reads), the key index's bytes per key on disk and the
// heap's growth per key.
func BenchmarkUpserts(b *testing.B) {
	keys := benchKeys(b)
	for b.Loop() {
		heap0 := heapInUse()
		var tables [2]*table.Table
		for i, keyed := range []bool{false, true} {
			s, err := table.Open(b.TempDir(), table.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			cfg := table.Config{Name: "state", HashBy: "region", SortBy: "ts"}
			if keyed {
				cfg.PrimaryKey = []string{"id"}
			}
			if tables[i], err = s.Table(cfg); err != nil {
				b.Fatal(err)
			}
		}
		plain, keyed := tables[0], tables[1]
		load := &changes{keys: keys}
		// The same rows to both, in rounds of 64 batches so that the
		// batches' memory stays small at 10M keys.
		var loadPlainCPU, loadKeyedCPU float64
		for first := 0; first < keys; first += 64 * batchRows {
			var batches [][]table.Row
			for f := first; f < min(keys, first+64*batchRows); f += batchRows {
				batches = append(batches, load.batch(f))
			}
			n := float64(len(batches) * batchRows)
			loadPlainCPU += n / appendAll(b, plain, batches)
			loadKeyedCPU += n / appendAll(b, keyed, batches)
		}
		loadPlain, loadKeyed := float64(keys)/loadPlainCPU, float64(keys)/loadKeyedCPU
		b.ReportMetric(loadPlain, "load-plain-rows/cpu-s")
		b.ReportMetric(loadKeyed, "load-keyed-rows/cpu-s")

		skew := &changes{keys: keys, zipf: rand.NewZipf(rand.New(rand.NewPCG(30, 1)), zipfS, 1, uint64(keys-1)), offsets: load.offsets, seq: load.seq}
		// Changes in rounds of 64 batches (the same rows to both tables),
		// so the batches' memory stays small at 10M keys.
		var plainCPU, keyedCPU float64
		for done := 0; done < keys; done += 64 * batchRows {
			batches := make([][]table.Row, 64)
			for i := range batches {
				batches[i] = skew.batch(0)
			}
			n := float64(len(batches) * batchRows)
			plainCPU += n / appendAll(b, plain, batches)
			keyedCPU += n / appendAll(b, keyed, batches)
		}
		changed := float64((keys + 64*batchRows - 1) / (64 * batchRows) * 64 * batchRows)
		b.ReportMetric(changed/plainCPU, "change-plain-rows/cpu-s")
		b.ReportMetric(changed/keyedCPU, "change-keyed-rows/cpu-s")

		// Change → visible at 50k changes/s, into each table in turn.
		for _, tb := range []*table.Table{plain, keyed} {
			name := "plain"
			if tb == keyed {
				name = "keyed"
			}
			lat, appendTime, behind := paced(b, tb, skew)
			b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "visible-"+name+"-p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "visible-"+name+"-p99-ms")
			b.ReportMetric(float64(appendTime.Microseconds())/1000, "append-"+name+"-ms")
			b.ReportMetric(float64(behind), "ticks-behind-"+name)
			lat, appendTime, rows := polled(b, tb, skew)
			b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "polled-"+name+"-p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "polled-"+name+"-p99-ms")
			b.ReportMetric(float64(appendTime.Microseconds())/1000, "polled-append-"+name+"-ms")
			b.ReportMetric(rows, "polled-rows-"+name)
		}

		// A keyed cluster query's member walks its key index for its
		// deleted keys (every key when the query filters).
		for _, withLive := range []bool{false, true} {
			t0 := time.Now()
			err := keyed.KeyStates(context.Background(), withLive, func(table.KeyState) error { return nil })
			if err != nil {
				b.Fatal(err)
			}
			name := "keystates-deleted-ms"
			if withLive {
				name = "keystates-all-ms"
			}
			b.ReportMetric(float64(time.Since(t0).Microseconds())/1000, name)
		}

		idx, err := keyed.KeyIndexDiskUsage()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(idx)/float64(keys), "index-disk-B/key")
		b.ReportMetric(float64(heapInUse()-min(heap0, heapInUse()))/float64(keys), "heap-B/key")
		b.ReportMetric(float64(keys), "keys")
	}
}

// paced appends changes to tb at 50,000 a second for 10 s, a batch each
// 20 ms (as a consumer's poll), and returns for each batch the time from
// its first change's arrival (the start of the tick it was filled in) to a
// query seeing it (a keyed table's Lookup of the batch's last upsert; an
// append-only table's rows are visible when its append returns), sorted;
// the mean append time; and the ticks that started late (the appends fell
// behind the stream).
func paced(b *testing.B, tb *table.Table, src *changes) (lat []time.Duration, meanAppend time.Duration, behind int) {
	const rate, tick, runFor = 50_000, 20 * time.Millisecond, 10 * time.Second
	ctx := context.Background()
	keyed := len(tb.PrimaryKey()) > 0
	var appending time.Duration
	start := time.Now()
	next := start
	for time.Since(start) < runFor {
		filled := next
		next = next.Add(tick)
		rows := src.batch(0)[:rate*int(tick/time.Millisecond)/1000]
		last := rows[len(rows)-1]
		delete(last, table.OperationColumn) // an upsert, to look up
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		} else {
			behind++
		}
		t0 := time.Now()
		if err := tb.Append(ctx, rows); err != nil {
			b.Fatal(err)
		}
		appending += time.Since(t0)
		if keyed {
			row, ok, err := tb.Lookup(ctx, []any{last["id"]})
			if err != nil || !ok || row["v"] != last["v"] {
				b.Fatalf("lookup of %v after its append: %v %v %v", last["id"], row, ok, err)
			}
		}
		lat = append(lat, time.Since(filled))
	}
	slices.Sort(lat)
	return lat, appending / time.Duration(len(lat)), behind
}

// maxPoll is what one batch of a Kafka source holds at most
// (stream.DefaultMaxPollRecords; the benchmark does not import stream).
const maxPoll = 5000

// polled is paced as a Kafka source consumes: the changes arrive at
// 50,000 a second for 10 s, and each batch takes every change that
// arrived since the last one was taken (at least a 20 ms poll's worth,
// at most maxPoll), so that a store that fell behind catches up with
// larger batches instead of a queue of small ones. It returns for each
// batch the time from its first change's arrival to a Lookup that sees
// its last upsert (an append-only table's rows: when the append returns),
// sorted; the mean append time; and the mean rows per batch.
func polled(b *testing.B, tb *table.Table, src *changes) (lat []time.Duration, meanAppend time.Duration, meanRows float64) {
	const rate, tick, runFor = 50_000, 20 * time.Millisecond, 10 * time.Second
	tickRows := rate * int(tick/time.Millisecond) / 1000
	ctx := context.Background()
	keyed := len(tb.PrimaryKey()) > 0
	arrival := func(i int) time.Duration { return time.Duration(i) * time.Second / rate }
	var appending time.Duration
	taken, batches := 0, 0
	start := time.Now()
	for time.Since(start) < runFor {
		if d := arrival(taken+tickRows) - time.Since(start); d > 0 {
			time.Sleep(d) // a poll's worth has not arrived yet
		}
		arrived := int(time.Since(start) * rate / time.Second)
		n := min(arrived-taken, maxPoll)
		var rows []table.Row
		for len(rows) < n {
			rows = append(rows, src.batch(0)...)
		}
		rows = rows[:n]
		last := rows[len(rows)-1]
		delete(last, table.OperationColumn) // an upsert, to look up
		t0 := time.Now()
		if err := tb.Append(ctx, rows); err != nil {
			b.Fatal(err)
		}
		appending += time.Since(t0)
		if keyed {
			row, ok, err := tb.Lookup(ctx, []any{last["id"]})
			if err != nil || !ok || row["v"] != last["v"] {
				b.Fatalf("lookup of %v after its append: %v %v %v", last["id"], row, ok, err)
			}
		}
		lat = append(lat, time.Since(start)-arrival(taken))
		taken += n
		batches++
	}
	slices.Sort(lat)
	return lat, appending / time.Duration(batches), float64(taken) / float64(batches)
}
