// Package ingestbench is `sluice bench ingest`: it starts a real server
// in-process on a 127.0.0.1 port, sends 10-field rows over HTTP in batches
// of 1000 from several clients, and reports rows/s and p50/p99 batch
// latency with no computed column, one Lua column and one Go plugin column,
// then the rows/s of a streamed one-partition time-range query and of one
// over 64 partitions.
//
// Client and server share the machine (and its cores): the figures are
// those of the whole loop, encoding and HTTP included, not of the server
// alone.
package ingestbench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicedb/sluice/compute/plugbuild"
	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/luajit"
	"github.com/sluicedb/sluice/server"
)

// Options configure a run.
type Options struct {
	// Duration of each ingest case (default 5s).
	Duration time.Duration
	// Clients sending batches concurrently (default 4).
	Clients int
	// BatchRows per request (default 1000).
	BatchRows int
	// Partitions is the number of distinct hashBy values spread over each
	// batch (default 10). The table writes one block per partition per
	// batch, so 1000 partitions in a 1000-row batch means 1000 one-row
	// blocks: the store's worst case.
	Partitions int
	// Cases to run, among "none", "lua", "luajit", "plugin", and the
	// queries "query" (one partition) and "range" (every one of 64
	// partitions) (default all but range; luajit is skipped in a binary
	// built without -tags luajit).
	Cases []string
	// QueryRows ingested for a query case (default 1,000,000).
	QueryRows int
	// Dir holds the stores and the plugin (default a temporary directory,
	// removed after).
	Dir string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// CPUProfile, when set, is written with the CPU profile of the run
	// (of this process: with CPUs, the clients only).
	CPUProfile string
	// CPUs, when set, runs every ingest case once per CPU count p with the
	// server in a child process of its own (Sluice SluiceArgs serve ...)
	// with GOMAXPROCS=p, pinned to the first p cores while this process,
	// the clients, is pinned to the others (when the machine has more than
	// p cores). The server's own CPU time then gives its rows per
	// CPU-second, the clients' work excluded.
	CPUs []int
	// Sluice and SluiceArgs start a server: Sluice SluiceArgs serve
	// --config ... (default this executable, no arguments: sluice-bench
	// passes "sluice").
	Sluice     string
	SluiceArgs []string
}

// Result is one case's figures.
type Result struct {
	Case       string
	Rows       int64
	Seconds    float64
	RowsPerSec float64
	P50, P99   time.Duration // batch latency; zero for the query case
	// CPUSeconds is the process's CPU time (user+sys, clients and Pebble's
	// background work included) during the case, and RowsPerCPUSec the rows
	// per CPU-second: on a shared machine it moves less than RowsPerSec.
	CPUSeconds    float64
	RowsPerCPUSec float64
	// CPUs is the server's GOMAXPROCS (Options.CPUs; 0: in-process, the
	// machine's). ServerCPUSeconds is then the server process's own CPU
	// time during the case and ServerRowsPerCPUSec its rows per
	// CPU-second; CPUSeconds and RowsPerCPUSec count both processes.
	CPUs                int
	ServerCPUSeconds    float64
	ServerRowsPerCPUSec float64
	Note                string
}

// cpuTime is the process's user+sys CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (r *Result) setCPU(d time.Duration) {
	r.CPUSeconds = d.Seconds()
	if r.CPUSeconds > 0 {
		r.RowsPerCPUSec = float64(r.Rows) / r.CPUSeconds
	}
}

const luaColumn = `
    computed:
      - name: score2
        type: float64
        func: "function main(row) return row.score * 2 end"
`

const pluginSource = `package main

func Double(row map[string]interface{}) (interface{}, error) {
	if f, ok := row["score"].(float64); ok {
		return f * 2, nil
	}
	return nil, nil
}
`

func configYAML(computed string) string {
	return `
limits: {max_inflight: 64, max_body_bytes: 268435456}
tables:
  - name: bench
    hashBy: user
    sortBy: time
    schema:
      - {name: time, type: timestamp}
      - {name: user, type: string}
      - {name: action, type: string}
      - {name: country, type: string}
      - {name: device, type: string}
      - {name: amount, type: float64}
      - {name: score, type: float64}
      - {name: count, type: int64}
      - {name: session, type: int64}
      - {name: ok, type: bool}
` + computed
}

// Run runs every case and returns the figures.
func Run(ctx context.Context, opts Options) ([]Result, error) {
	if opts.Duration <= 0 {
		opts.Duration = 5 * time.Second
	}
	if opts.Clients <= 0 {
		opts.Clients = 4
	}
	if opts.BatchRows <= 0 {
		opts.BatchRows = 1000
	}
	if opts.Partitions <= 0 {
		opts.Partitions = 10
	}
	if len(opts.Cases) == 0 {
		opts.Cases = []string{"none", "lua", "luajit", "plugin", "query"}
	}
	if opts.QueryRows <= 0 {
		opts.QueryRows = 1_000_000
	}
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	dir := opts.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "sluice-bench-ingest-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	if opts.CPUProfile != "" {
		f, err := os.Create(opts.CPUProfile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}
	bodies := makeBodies(opts.BatchRows, opts.Partitions, 64)
	var out []Result
	if len(opts.CPUs) > 0 {
		return runCPUs(ctx, opts, dir, bodies, logw)
	}
	for _, c := range opts.Cases {
		var res Result
		var err error
		switch c {
		case "none":
			res, err = ingestCase(ctx, c, configYAML(""), filepath.Join(dir, c), bodies, opts)
		case "lua":
			res, err = ingestCase(ctx, c, configYAML(luaColumn), filepath.Join(dir, c), bodies, opts)
		case "luajit":
			// the same column on the LuaJIT engine (docs/luajit.md)
			if !luajit.Available {
				res = Result{Case: c, Note: "skipped: " + luajit.ErrUnavailable.Error()}
				break
			}
			col := strings.Replace(luaColumn, "type: float64", "type: float64\n        engine: luajit", 1)
			res, err = ingestCase(ctx, c, configYAML(col), filepath.Join(dir, c), bodies, opts)
		case "plugin":
			so, berr := plugbuild.BuildFile(dir, "double.so", pluginSource)
			if berr != nil {
				res = Result{Case: c, Note: "skipped: " + berr.Error()}
				break
			}
			col := fmt.Sprintf(`
    computed:
      - name: score2
        type: float64
        func: %s
        funcname: Double
`, so)
			res, err = ingestCase(ctx, c, configYAML(col), filepath.Join(dir, c), bodies, opts)
		case "query", "range":
			res, err = queryCase(ctx, c, filepath.Join(dir, c), opts)
		default:
			err = fmt.Errorf("unknown case %q (want none, lua, luajit, plugin, query or range)", c)
		}
		if err != nil {
			return out, fmt.Errorf("case %s: %w", c, err)
		}
		fmt.Fprintf(logw, "%s\n", Format([]Result{res}))
		out = append(out, res)
	}
	return out, nil
}

// makeBodies pre-encodes n NDJSON batches of rows 10-field rows over
// partitions users, so that the clients spend their time sending, not
// formatting.
func makeBodies(rows, partitions, n int) [][]byte {
	actions := []string{"view", "buy", "click", "share"}
	countries := []string{"SG", "ID", "MY", "TH", "VN", "PH"}
	devices := []string{"ios", "android", "web"}
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	out := make([][]byte, n)
	for b := range out {
		var buf bytes.Buffer
		for i := 0; i < rows; i++ {
			k := b*rows + i
			ts := base.Add(time.Duration(k) * 37 * time.Millisecond)
			fmt.Fprintf(&buf, `{"time":"%s","user":"u%d","action":"%s","country":"%s","device":"%s","amount":%d.%02d,"score":%d.5,"count":%d,"session":%d,"ok":%t}`+"\n",
				ts.Format(time.RFC3339Nano), k%partitions, actions[k%4], countries[k%6], devices[k%3], k%500, k%100, k%97, k%13, k/7, k%2 == 0)
		}
		out[b] = buf.Bytes()
	}
	return out
}

type running struct {
	url  string
	stop func() error
	// cpu is the server process's CPU time so far (nil: in-process).
	cpu func() time.Duration
}

func start(ctx context.Context, yaml, dir string) (*running, error) {
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, err
	}
	s, err := server.New(ctx, cfg, server.Options{StorageDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Serve(sctx, ln) }()
	return &running{url: "http://" + ln.Addr().String(), stop: func() error { cancel(); return <-done }}, nil
}

func ingestCase(ctx context.Context, name, yaml, dir string, bodies [][]byte, opts Options) (Result, error) {
	r, err := start(ctx, yaml, dir)
	if err != nil {
		return Result{}, err
	}
	return load(ctx, name, r, bodies, opts)
}

// load runs the clients against r for opts.Duration, then stops r.
func load(ctx context.Context, name string, r *running, bodies [][]byte, opts Options) (Result, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: opts.Clients}
	client := &server.Client{URL: r.url, HTTP: &http.Client{Transport: tr}, NoIdempotencyKey: true}
	var mu sync.Mutex
	var lat []time.Duration
	var rows int64
	var firstErr error
	deadline := time.Now().Add(opts.Duration)
	begin := time.Now()
	cpu0 := cpuTime()
	var server0 time.Duration
	if r.cpu != nil {
		server0 = r.cpu()
	}
	var wg sync.WaitGroup
	for c := 0; c < opts.Clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			var mine []time.Duration
			var n int64
			for i := c; time.Now().Before(deadline); i += opts.Clients {
				t0 := time.Now()
				res, err := client.PostBatch(ctx, "bench", "application/x-ndjson", bodies[i%len(bodies)])
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
				n += int64(res.Accepted)
			}
			mu.Lock()
			lat = append(lat, mine...)
			rows += n
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	secs := time.Since(begin).Seconds()
	cpu := cpuTime() - cpu0
	var serverCPU time.Duration
	if r.cpu != nil {
		serverCPU = r.cpu() - server0
	}
	tr.CloseIdleConnections()
	if err := r.stop(); err != nil && firstErr == nil {
		firstErr = err
	}
	if firstErr != nil {
		return Result{}, firstErr
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	res := Result{Case: name, Rows: rows, Seconds: secs, RowsPerSec: float64(rows) / secs}
	res.setCPU(cpu + serverCPU)
	if r.cpu != nil {
		res.ServerCPUSeconds = serverCPU.Seconds()
		if serverCPU > 0 {
			res.ServerRowsPerCPUSec = float64(rows) / serverCPU.Seconds()
		}
	}
	if len(lat) > 0 {
		res.P50 = lat[len(lat)/2]
		res.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return res, nil
}

// rangePartitions is how many hashBy values the rows of the range query
// case are spread over.
const rangePartitions = 64

// queryCase runs a query case (queryRows) against a server of its own in
// this process.
func queryCase(ctx context.Context, name, dir string, opts Options) (Result, error) {
	r, err := start(ctx, configYAML(""), dir)
	if err != nil {
		return Result{}, err
	}
	defer r.stop()
	return queryRows(ctx, name, r, opts)
}

// queryRows stores QueryRows rows over a day, then times a streamed NDJSON
// query over the whole range, best of 3: case "query" puts the rows in one
// partition and queries it (hash=), case "range" spreads them over
// rangePartitions partitions and queries them all (the multi-partition hot
// range: its blocks decoded and encoded on the server's cores at once).
func queryRows(ctx context.Context, name string, r *running, opts Options) (Result, error) {
	client := &server.Client{URL: r.url}
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	step := 24 * time.Hour / time.Duration(opts.QueryRows)
	users, what := 1, "one partition"
	u := r.url + "/v1/tables/bench/query?from=2024-05-01T00:00:00Z&to=2024-05-02T00:00:00Z"
	if name == "range" {
		users, what = rangePartitions, fmt.Sprintf("%d partitions", rangePartitions)
	} else {
		u += "&hash=hot"
	}
	var buf bytes.Buffer
	for k := 0; k < opts.QueryRows; {
		buf.Reset()
		for i := 0; i < 10000 && k < opts.QueryRows; i, k = i+1, k+1 {
			user := "hot"
			if users > 1 {
				user = fmt.Sprintf("u%d", k%users)
			}
			fmt.Fprintf(&buf, `{"time":"%s","user":"%s","action":"view","country":"SG","device":"web","amount":%d.5,"score":1.5,"count":%d,"session":%d,"ok":true}`+"\n",
				base.Add(time.Duration(k)*step).Format(time.RFC3339Nano), user, k%500, k%97, k/7)
		}
		if _, err := client.PostBatch(ctx, "bench", "application/x-ndjson", buf.Bytes()); err != nil {
			return Result{}, err
		}
	}
	best := Result{Case: name}
	for run := 0; run < 3; run++ {
		t0, cpu0 := time.Now(), cpuTime()
		var server0 time.Duration
		if r.cpu != nil {
			server0 = r.cpu()
		}
		resp, err := http.Get(u)
		if err != nil {
			return Result{}, err
		}
		n := int64(0)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			n++
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil {
			return Result{}, err
		}
		secs, cpu := time.Since(t0).Seconds(), cpuTime()-cpu0
		var serverCPU time.Duration
		if r.cpu != nil {
			serverCPU = r.cpu() - server0
		}
		if n != int64(opts.QueryRows) {
			return Result{}, fmt.Errorf("query returned %d rows, stored %d", n, opts.QueryRows)
		}
		if rps := float64(n) / secs; rps > best.RowsPerSec {
			best = Result{Case: name, Rows: n, Seconds: secs, RowsPerSec: rps, Note: "best of 3, " + what + ", NDJSON streamed to the client"}
			best.setCPU(cpu + serverCPU)
			if r.cpu != nil {
				best.ServerCPUSeconds = serverCPU.Seconds()
				if serverCPU > 0 {
					best.ServerRowsPerCPUSec = float64(n) / serverCPU.Seconds()
				}
			}
		}
	}
	return best, nil
}

// Format renders results as a table.
func Format(rs []Result) string {
	var b strings.Builder
	for _, r := range rs {
		if r.Rows == 0 && r.Note != "" {
			fmt.Fprintf(&b, "%-7s %s\n", r.Case, r.Note)
			continue
		}
		if r.CPUs > 0 {
			fmt.Fprintf(&b, "%-7s cpus %2d %10d rows %7.2fs %12.0f rows/s %12.0f server rows/CPU-s %12.0f rows/CPU-s (with clients)",
				r.Case, r.CPUs, r.Rows, r.Seconds, r.RowsPerSec, r.ServerRowsPerCPUSec, r.RowsPerCPUSec)
			if r.P50 > 0 {
				fmt.Fprintf(&b, "  p50 %8.2fms  p99 %8.2fms", ms(r.P50), ms(r.P99))
			}
			if r.Note != "" {
				fmt.Fprintf(&b, "  (%s)", r.Note)
			}
			b.WriteString("\n")
			continue
		}
		fmt.Fprintf(&b, "%-7s %10d rows %7.2fs %12.0f rows/s %12.0f rows/CPU-s", r.Case, r.Rows, r.Seconds, r.RowsPerSec, r.RowsPerCPUSec)
		if r.P50 > 0 {
			fmt.Fprintf(&b, "  p50 %8.2fms  p99 %8.2fms", ms(r.P50), ms(r.P99))
		}
		if r.Note != "" {
			fmt.Fprintf(&b, "  (%s)", r.Note)
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
