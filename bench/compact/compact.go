// Package compact is the harness behind `sluice bench compact`: it fills a
// store, compacts it into an Iceberg table on a local versitygw S3 server
// (the one the tests use), and measures the run (rows/s, MB/s, Parquet
// bytes per row against the store's, peak RSS) and a query of a range that
// lies wholly in the cold tier, with DuckDB's read_parquet of the same
// files in the same run as the reference.
package compact

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sluicedb/sluice/coldtier"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/procmem"
	"github.com/sluicedb/sluice/table"
)

// Options of a run; zero values take the defaults.
type Options struct {
	Rows         int    // rows to compact (default 1,000,000)
	Days         int    // days they span (default 10)
	Users        int    // hashBy values (default 1000)
	RowGroupRows int    // rows per Arrow batch / Parquet row group (default 131072)
	Unsorted     bool   // compact in hash order, not sorted by key
	Dir          string // work directory (default a temporary one)
	CPUProfile   string // CPU profile of the cold-range query, when set
	// CompactProfile is a CPU profile of the compaction, when set.
	CompactProfile string
	// CPUs is GOMAXPROCS during the compaction (0: unchanged).
	CPUs int
	// NoQuery skips the cold-range query and DuckDB's read.
	NoQuery bool
	Log     io.Writer
}

// Result is what a run measured.
type Result struct {
	Rows                 int64
	CompactSeconds       float64
	CompactCPUSeconds    float64
	ParquetBytes         int64
	StoreBytesPerRow     float64
	PeakRSSBytes         int64 // during the compaction (VmHWM after a reset)
	PeakAnonBytes        int64 // during the compaction (RssAnon sampled every 2 ms): VmHWM without the executable's file pages
	BaseRSSBytes         int64 // before it (the store's caches and memtables included)
	QueryRows            int64
	QuerySeconds         float64
	QueryCPUSeconds      float64
	DuckDBRows           int64
	DuckDBSeconds        float64
	DuckDBError          string
	RowGroupRows         int
	CPUs                 int // GOMAXPROCS during the compaction
	Files                int64
	StoreBytesWritten    int64
	ParquetBytesPerRow   float64
	CompactRowsPerSecond float64
	CompactMBPerSecond   float64
	QueryRowsPerSecond   float64
	DuckDBRowsPerSecond  float64
}

func (o *Options) defaults() {
	if o.Rows <= 0 {
		o.Rows = 1_000_000
	}
	if o.Days <= 0 {
		o.Days = 10
	}
	if o.Users <= 0 {
		o.Users = 100
	}
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = 1 << 17
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

var day0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Run does the whole benchmark.
func Run(ctx context.Context, o Options) (Result, error) {
	o.defaults()
	res := Result{RowGroupRows: o.RowGroupRows}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "sluice-bench-compact-")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	s3, err := coldtest.StartS3(dir)
	if err != nil {
		return res, err
	}
	defer s3.Stop()
	st, tb, err := openStore(dir)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(o.Log, "filling the store with %d rows over %d days...\n", o.Rows, o.Days)
	if err := fill(ctx, tb, o); err != nil {
		st.Close()
		return res, err
	}
	res.StoreBytesWritten = tb.Stats().BytesWritten
	res.StoreBytesPerRow = float64(res.StoreBytesWritten) / float64(o.Rows)
	// Reopen the store and return the fill's memory to the OS, so that the
	// compaction starts from a store as a restarted server has it.
	if err := st.Close(); err != nil {
		return res, err
	}
	debug.FreeOSMemory()
	if st, tb, err = openStore(dir); err != nil {
		return res, err
	}
	defer st.Close()

	cfg := coldtier.Config{
		Warehouse: "s3://" + coldtest.Bucket + "/bench",
		S3:        coldtier.S3{Endpoint: s3.Endpoint, Region: coldtest.Region, PathStyle: true},
		StateDir:  dir, Node: "bench", RowGroupRows: o.RowGroupRows, Unsorted: o.Unsorted,
	}
	c, err := coldtier.Open(ctx, cfg, tb)
	if err != nil {
		return res, err
	}
	defer c.Close()

	fmt.Fprintln(o.Log, "compacting...")
	if o.CPUs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(o.CPUs))
	}
	res.CPUs = runtime.GOMAXPROCS(0)
	if o.CompactProfile != "" {
		f, err := os.Create(o.CompactProfile)
		if err != nil {
			return res, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return res, err
		}
	}
	res.BaseRSSBytes, _ = procmem.Status(0, "VmRSS")
	procmem.ResetPeak()
	anonPeak := procmem.SamplePeak(0, "RssAnon")
	cpu0 := cpuSeconds()
	t0 := time.Now()
	stats, err := c.Compact(ctx, day0.Add(time.Duration(o.Days)*24*time.Hour), coldtier.Options{Remove: true})
	res.PeakAnonBytes = anonPeak()
	if o.CompactProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return res, err
	}
	res.CompactSeconds = time.Since(t0).Seconds()
	res.CompactCPUSeconds = cpuSeconds() - cpu0
	res.PeakRSSBytes, _ = procmem.Status(0, "VmHWM")
	res.Rows, res.ParquetBytes, res.Files = stats.Rows, stats.Bytes, stats.Files
	res.ParquetBytesPerRow = float64(stats.Bytes) / float64(max(stats.Rows, 1))
	res.CompactRowsPerSecond = float64(stats.Rows) / res.CompactSeconds
	res.CompactMBPerSecond = float64(stats.Bytes) / 1e6 / res.CompactSeconds

	if o.NoQuery {
		return res, nil
	}
	fmt.Fprintln(o.Log, "querying the cold range...")
	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			return res, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return res, err
		}
	}
	cpu0 = cpuSeconds()
	t0 = time.Now()
	err = c.QueryValues(ctx, table.Query{From: day0, To: day0.Add(time.Duration(o.Days) * 24 * time.Hour)}, true,
		func(_ []table.Column, _ []any) error { res.QueryRows++; return nil })
	if err != nil {
		return res, err
	}
	res.QuerySeconds = time.Since(t0).Seconds()
	if o.CPUProfile != "" {
		pprof.StopCPUProfile()
	}
	res.QueryCPUSeconds = cpuSeconds() - cpu0
	res.QueryRowsPerSecond = float64(res.QueryRows) / res.QuerySeconds

	fmt.Fprintln(o.Log, "DuckDB read_parquet of the same files...")
	if err := duckdb(ctx, c, s3.Root, &res); err != nil {
		res.DuckDBError = err.Error()
	}
	return res, nil
}

func openStore(dir string) (*table.Store, *table.Table, error) {
	st, err := table.Open(filepath.Join(dir, "store"), table.Options{})
	if err != nil {
		return nil, nil, err
	}
	tb, err := st.Table(table.Config{Name: "events", HashBy: "user", SortBy: "ts", Columns: []table.Column{
		{Name: "user", Type: table.String}, {Name: "ts", Type: table.Timestamp}, {Name: "n", Type: table.Int64},
		{Name: "price", Type: table.Float64}, {Name: "qty", Type: table.Int64}, {Name: "ok", Type: table.Bool},
		{Name: "country", Type: table.String}, {Name: "note", Type: table.String}, {Name: "doc", Type: table.JSON},
	}})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, tb, nil
}

func fill(ctx context.Context, tb *table.Table, o Options) error {
	const batch = 10000
	countries := []string{"SG", "ID", "MY", "TH", "VN", "PH"}
	rows := make([]table.Row, 0, batch)
	span := time.Duration(o.Days) * 24 * time.Hour
	for i := range o.Rows {
		ts := day0.Add(time.Duration(i) * (span / time.Duration(o.Rows)))
		rows = append(rows, table.Row{
			"user": "user-" + strconv.Itoa(i*7919%o.Users), "ts": ts, "n": int64(i),
			"price": float64(i%10000) / 100, "qty": int64(i % 17), "ok": i%3 != 0,
			"country": countries[i%len(countries)], "note": "order " + strconv.Itoa(i%5000),
			"doc": json.RawMessage(`{"src":"app","v":` + strconv.Itoa(i%100) + `}`),
		})
		if len(rows) == batch || i == o.Rows-1 {
			if err := tb.Append(ctx, rows); err != nil {
				return err
			}
			rows = rows[:0]
		}
	}
	return nil
}

const duckScript = `
import json, sys, time, duckdb
files = json.loads(sys.argv[1])
con = duckdb.connect()
t0 = time.perf_counter()
tbl = con.sql("SELECT * FROM read_parquet(%s, hive_partitioning=false)" % json.dumps(files).replace('"', "'")).fetch_arrow_table()
print(json.dumps({"rows": tbl.num_rows, "seconds": time.perf_counter() - t0}))
`

// duckdb times DuckDB reading every row of the same files (through the S3
// server's POSIX directory: the httpfs extension cannot be installed
// offline) into an Arrow table.
func duckdb(ctx context.Context, c *coldtier.Compactor, root string, res *Result) error {
	py, err := coldtest.Python()
	if err != nil {
		return err
	}
	files, err := c.DataFiles(ctx)
	if err != nil {
		return err
	}
	for i, f := range files {
		files[i] = filepath.Join(root, strings.TrimPrefix(f, "s3://"))
	}
	arg, _ := json.Marshal(files)
	out, err := coldtest.RunPython(ctx, py, duckScript, string(arg))
	if err != nil {
		return err
	}
	var r struct {
		Rows    int64   `json:"rows"`
		Seconds float64 `json:"seconds"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return fmt.Errorf("duckdb output %q: %w", out, err)
	}
	res.DuckDBRows, res.DuckDBSeconds = r.Rows, r.Seconds
	res.DuckDBRowsPerSecond = float64(r.Rows) / r.Seconds
	return nil
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// Format prints a result as a table.
func Format(r Result) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "what\tvalue\ttarget\t\n")
	fmt.Fprintf(w, "rows compacted\t%d\t\t\n", r.Rows)
	fmt.Fprintf(w, "GOMAXPROCS during the compaction\t%d\t\t\n", r.CPUs)
	fmt.Fprintf(w, "compaction seconds (wall / CPU)\t%.2f / %.2f\t\t\n", r.CompactSeconds, r.CompactCPUSeconds)
	fmt.Fprintf(w, "compaction rows/s (wall)\t%.0f\t\t\n", r.CompactRowsPerSecond)
	fmt.Fprintf(w, "compaction rows per CPU-second\t%.0f\t\t\n", float64(r.Rows)/max(r.CompactCPUSeconds, 1e-9))
	fmt.Fprintf(w, "compaction MB/s of Parquet uploaded\t%.1f\t\t\n", r.CompactMBPerSecond)
	fmt.Fprintf(w, "data files\t%d\t\t\n", r.Files)
	fmt.Fprintf(w, "Parquet bytes/row\t%.1f\t\t\n", r.ParquetBytesPerRow)
	fmt.Fprintf(w, "store bytes/row (blocks written)\t%.1f\t\t\n", r.StoreBytesPerRow)
	fmt.Fprintf(w, "peak RSS during compaction (row group %d rows)\t%.0f MB\t<= 256 MB\t\n", r.RowGroupRows, float64(r.PeakRSSBytes)/1e6)
	fmt.Fprintf(w, "peak anonymous RSS during compaction (sampled RssAnon)\t%.0f MB\t\t\n", float64(r.PeakAnonBytes)/1e6)
	fmt.Fprintf(w, "RSS before the compaction (store reopened)\t%.0f MB\t\t\n", float64(r.BaseRSSBytes)/1e6)
	if r.QueryRows == 0 {
		w.Flush()
		return b.String()
	}
	fmt.Fprintf(w, "cold-range query rows/s (wall)\t%.0f\t>= 2M\t\n", r.QueryRowsPerSecond)
	fmt.Fprintf(w, "cold-range query rows per CPU-second\t%.0f\t\t\n", float64(r.QueryRows)/max(r.QueryCPUSeconds, 1e-9))
	if r.DuckDBError != "" {
		fmt.Fprintf(w, "DuckDB read_parquet rows/s\tfailed: %s\t\t\n", r.DuckDBError)
	} else {
		fmt.Fprintf(w, "DuckDB read_parquet rows/s (same files, reference)\t%.0f\t\t\n", r.DuckDBRowsPerSecond)
	}
	w.Flush()
	return b.String()
}
