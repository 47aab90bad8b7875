// Package trino_test runs the sluice connector for Trino (the Java plugin
// beside this file, built by scripts/build-trino-connector) in a real
// Trino 476 over three real sluice nodes.
package trino_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/server"
)

// pluginDir is what `mvn package` (scripts/build-trino-connector) leaves.
const pluginDir = "target/plugin/sluice"

// catalogMarker is the catalog file of docs/cluster.md this test uses, so
// the documented file cannot drift.
const catalogMarker = "<!-- trino-catalog: sluice, read by connectors/trino/trino_test.go -->"

const tableYAML = `
tables:
  - name: events
    hashBy: user
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
      - {name: score, type: float64}
      - {name: ok, type: bool}
`

// row n of the test data: 50 users, one row a minute from base.
var base = time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)

func user(n int) string   { return fmt.Sprintf("u%d", n%50) }
func at(n int) time.Time  { return base.Add(time.Duration(n) * time.Minute) }
func score(n int) float64 { return float64(n) / 4 }
func ok(n int) bool       { return n%3 == 0 }
func rowJSON(n int) string {
	return fmt.Sprintf(`{"user":%q,"ts":%q,"n":%d,"score":%g,"ok":%t}`, user(n), at(n).Format(time.RFC3339Nano), n, score(n), ok(n))
}

func startNodes(t testing.TB, n int) []string {
	t.Helper()
	return startNodesWith(t, n, tableYAML)
}

// startNodesWith starts a cluster of n nodes, each with the tables of
// tablesYAML.
func startNodesWith(t testing.TB, n int, tablesYAML string) []string {
	t.Helper()
	lns := make([]net.Listener, n)
	urls := make([]string, n)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], urls[i] = ln, "http://"+ln.Addr().String()
	}
	yaml := fmt.Sprintf("cluster: {members: [%s]}\n%s", strings.Join(urls, ", "), tablesYAML)
	for _, ln := range lns {
		cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		s, err := server.New(context.Background(), cfg, server.Options{StorageDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx, ln) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	return urls
}

func fill(t testing.TB, node string, first, count int) {
	t.Helper()
	var b strings.Builder
	for n := first; n < first+count; n++ {
		b.WriteString(rowJSON(n) + "\n")
	}
	resp, err := http.Post(node+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ingest: %d %s", resp.StatusCode, body)
	}
}

// docBlock is the fenced block that follows marker in docs/cluster.md.
func docBlock(t testing.TB, marker string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/cluster.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok1 := bytes.Cut(doc, []byte(marker))
	_, after, ok2 := bytes.Cut(after, []byte("```properties\n"))
	block, _, ok3 := bytes.Cut(after, []byte("\n```"))
	if !ok1 || !ok2 || !ok3 {
		t.Fatalf("docs/cluster.md: no properties block after %q", marker)
	}
	return string(block)
}

// catalogFile is docs/cluster.md's sluice catalog file naming node.
func catalogFile(t testing.TB, node string) string {
	t.Helper()
	block := docBlock(t, catalogMarker)
	const placeholder = "http://node-a:8080"
	if !strings.Contains(block, placeholder) {
		t.Fatalf("docs/cluster.md's catalog no longer names %s; update the test", placeholder)
	}
	return strings.ReplaceAll(block, placeholder, node) + "\n"
}

// The package's one Trino (with the sluice plugin beside the installed
// ones), started by the first test that needs it and stopped by TestMain:
// a Trino start costs about half a minute of CPU. Each test adds catalogs
// of its own (newCatalog), so tests do not see each other's.
var (
	trinoOnce  sync.Once
	trinoSrv   *coldtest.Trino
	trinoErr   error
	trinoDir   string
	catalogSeq atomic.Int64
)

func sharedTrino(t testing.TB) *coldtest.Trino {
	t.Helper()
	coldtest.Require(t, coldtest.FindTrino())
	requirePlugin(t)
	// Trino's Iceberg catalogs find the S3 server's keys in the environment
	// Trino starts with, which starting the S3 server sets: started first,
	// it serves whichever test starts Trino, in any order.
	sharedS3(t)
	trinoOnce.Do(func() {
		if trinoDir, trinoErr = os.MkdirTemp("", "trino-server-"); trinoErr == nil {
			trinoSrv, trinoErr = coldtest.StartTrino(trinoDir, nil, pluginDir)
		}
	})
	coldtest.Require(t, trinoErr)
	return trinoSrv
}

func stopTrino() {
	if trinoSrv != nil {
		trinoSrv.Stop()
	}
	if trinoDir != "" {
		os.RemoveAll(trinoDir)
	}
}

// newCatalog adds a catalog of the test's own to tr, from a catalog
// properties file's contents, and returns its name (prefix_N); it is
// dropped when the test ends.
func newCatalog(t testing.TB, tr *coldtest.Trino, prefix, props string) string {
	t.Helper()
	name := fmt.Sprintf("%s_%d", prefix, catalogSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tr.CreateCatalog(ctx, name, props); err != nil {
		log, _ := os.ReadFile(tr.Log)
		t.Fatalf("create catalog %s: %v\nTrino log (end): %s", name, err, log[max(0, len(log)-3000):])
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := tr.DropCatalog(ctx, name); err != nil {
			t.Errorf("drop catalog %s: %v", name, err)
		}
	})
	return name
}

func requirePlugin(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(pluginDir, "trino-sluice-0.1.0.jar")); err != nil {
		testenv.Missing(t, "the sluice Trino connector is not built (%v): run scripts/build-trino-connector", err)
	}
}

// processCPU is this process's CPU time, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

func TestTrinoReadsCluster(t *testing.T) {
	coldtest.Require(t, coldtest.FindTrino())
	requirePlugin(t)
	const perNode = 1000
	nodes := startNodes(t, 3)
	for i, u := range nodes {
		fill(t, u, i*perNode, perNode)
	}
	const total = 3 * perNode

	trino := sharedTrino(t)
	cat := newCatalog(t, trino, "sluice", catalogFile(t, nodes[1]))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	one := func(sql string) string {
		t.Helper()
		_, rows, err := trino.Query(ctx, sql)
		if err != nil {
			log, _ := os.ReadFile(trino.Log)
			t.Fatalf("%s: %v\nTrino log (end): %s", sql, err, log[max(0, len(log)-3000):])
		}
		if len(rows) != 1 || len(rows[0]) != 1 {
			t.Fatalf("%s: %v, want one value", sql, rows)
		}
		return fmt.Sprint(rows[0][0])
	}
	expect := func(sql string, want any) {
		t.Helper()
		if got := one(sql); got != fmt.Sprint(want) {
			t.Errorf("%s = %s, want %v", sql, got, want)
		}
	}

	// Expected values are computed from the data the test made, row by row.
	var sumN int
	var sumScore float64
	var okCount, okSum, inRange, ofUser7 int
	from, to := at(500), at(2100)
	for n := 0; n < total; n++ {
		sumN += n
		sumScore += score(n)
		if ok(n) {
			okCount++
			okSum += n
		}
		if !at(n).Before(from) && at(n).Before(to) {
			inRange++
		}
		if user(n) == "u7" {
			ofUser7++
		}
	}
	tbl := cat + ".cluster.events"
	expect("SELECT count(*) FROM "+tbl, total)
	expect("SELECT count(DISTINCT n) FROM "+tbl, total)
	expect("SELECT sum(n) FROM "+tbl, sumN)
	if got, err := strconv.ParseFloat(one("SELECT sum(score) FROM "+tbl), 64); err != nil || got != sumScore {
		t.Errorf("sum(score) = %v (%v), want %v", got, err, sumScore)
	}
	expect("SELECT count(*) FROM "+tbl+" WHERE ok", okCount)
	expect("SELECT sum(n) FROM "+tbl+" WHERE ok", okSum)
	// Every value against its own row's n (a value in the wrong row keeps
	// counts and sums).
	expect(fmt.Sprintf("SELECT count(*) FROM %s WHERE ok <> (n %% 3 = 0) OR score <> n / 4e0 OR \"user\" <> concat('u', cast(n %% 50 AS varchar)) "+
		"OR to_unixtime(ts) <> %d + n * 60", tbl, base.Unix()), 0)
	expect(fmt.Sprintf("SELECT count(*) FROM %s WHERE ts >= from_iso8601_timestamp('%s') AND ts < from_iso8601_timestamp('%s')",
		tbl, from.Format(time.RFC3339), to.Format(time.RFC3339)), inRange)
	expect("SELECT count(*) FROM "+tbl+" WHERE \"user\" = 'u7'", ofUser7)
	expect(fmt.Sprintf("SELECT count(*) FROM %s WHERE ts = from_iso8601_timestamp('%s')", tbl, at(1234).Format(time.RFC3339)), 1)
	expect("SELECT to_iso8601(max(ts)) FROM "+tbl, at(total-1).Format("2006-01-02T15:04:05.000000Z"))
	// One split per node: a join of the table with itself pairs every row
	// with exactly its own.
	expect("SELECT count(*) FROM "+tbl+" a JOIN "+tbl+" b ON a.n = b.n", total)
	expect("SELECT count(*) FROM "+cat+".information_schema.columns WHERE table_schema = 'cluster' AND table_name = 'events'", 5)
}

// BenchmarkTrinoCluster reads every row of a three-node cluster through
// Trino (sum over a column, so every row crosses the connector) and
// reports rows/s for the whole cluster and per node, with the connector
// reading Arrow (the default) and NDJSON, and the rows per CPU-second of
// the nodes and of Trino's JVM. The nodes, Trino and the benchmark share
// this machine's cores.
func BenchmarkTrinoCluster(b *testing.B) {
	coldtest.Require(b, coldtest.FindTrino())
	requirePlugin(b)
	const perNode = 300_000
	nodes := startNodes(b, 3)
	for i, u := range nodes {
		for lo := 0; lo < perNode; lo += 50_000 {
			fill(b, u, i*perNode+lo, 50_000)
		}
	}
	for _, format := range []string{"arrow", "ndjson"} {
		b.Run("format="+format, func(b *testing.B) {
			trino, err := coldtest.StartTrino(b.TempDir(), map[string]string{"sluice": catalogFile(b, nodes[0]) + "sluice.format=" + format + "\n"}, pluginDir)
			coldtest.Require(b, err)
			defer trino.Stop()
			ctx := context.Background()
			if _, _, err := trino.Query(ctx, "SELECT count(*) FROM sluice.cluster.events"); err != nil { // warm-up
				b.Fatal(err)
			}
			trinoCPU, nodeCPU := trino.CPUTime(), processCPU()
			b.ResetTimer()
			for range b.N {
				_, rows, err := trino.Query(ctx, "SELECT sum(n), count(*) FROM sluice.cluster.events")
				if err != nil {
					b.Fatal(err)
				}
				if got := fmt.Sprint(rows[0][1]); got != fmt.Sprint(3*perNode) {
					b.Fatalf("count %s, want %d", got, 3*perNode)
				}
			}
			rows := float64(b.N * 3 * perNode)
			rate := rows / b.Elapsed().Seconds()
			b.ReportMetric(rate, "rows/s")
			b.ReportMetric(rate/3, "rows/s/node")
			// CPU beside wall time: the machine is shared. The nodes run in
			// this process (the benchmark's own share is a few requests).
			if cpu := (processCPU() - nodeCPU).Seconds(); cpu > 0 {
				b.ReportMetric(rows/cpu, "node-rows/cpu-s")
			}
			if cpu := (trino.CPUTime() - trinoCPU).Seconds(); cpu > 0 {
				b.ReportMetric(rows/cpu, "trino-rows/cpu-s")
			}
		})
	}
}
