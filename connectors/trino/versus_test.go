package trino_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/server"
)

// versusNodeYAML is a node of BenchmarkTrinoSluiceVsIceberg: time-mode
// compaction that the benchmark runs on demand (the schedule is a day
// away), committing every row older than a second and then removing it
// from the store, into the REST catalog's table.
func versusNodeYAML(members []string, node, restURI, s3Endpoint string) string {
	return fmt.Sprintf(`
cluster: {members: [%s], node_timeout: 60s}
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
    compact:
      interval: 24h
      after: 1s
      remove: true
      iceberg:
        warehouse: s3://%s/versus
        s3: {endpoint: %q, region: %s, path_style: true}
        catalog: {type: rest, uri: %q}
        node: %s
        orphan_interval: -1s
        maintain: {interval: -1s}
`, strings.Join(members, ", "), coldtest.Bucket, s3Endpoint, coldtest.Region, restURI, node)
}

// versusRow is row n: 50 users, one row every 100 ms from coldBase (2024),
// so 900k rows span about a day, as a stream's table would.
func versusRow(n int) string {
	ts := coldBase.Add(time.Duration(n) * 100 * time.Millisecond)
	return fmt.Sprintf(`{"user":"u%d","ts":%q,"n":%d,"score":%g,"ok":%t}`, n%50, ts.Format(time.RFC3339Nano), n, float64(n)/4, n%3 == 0)
}

func startVersusNodes(b *testing.B) (nodes []string, restURI string) {
	s3 := sharedS3(b)
	dir := b.TempDir()
	rest, err := coldtest.StartREST(dir,
		"CATALOG_URI=jdbc:sqlite:file:"+filepath.Join(dir, "rest-catalog.db"),
		"CATALOG_IO__IMPL=org.apache.iceberg.aws.s3.S3FileIO", "CATALOG_S3_ENDPOINT="+s3.Endpoint,
		"CATALOG_S3_PATH__STYLE__ACCESS=true", "CATALOG_CLIENT_REGION="+coldtest.Region)
	coldtest.Require(b, err)
	b.Cleanup(rest.Stop)
	lns := make([]net.Listener, 3)
	nodes = make([]string, len(lns))
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		lns[i], nodes[i] = ln, "http://"+ln.Addr().String()
	}
	for i, ln := range lns {
		yaml := versusNodeYAML(nodes, fmt.Sprintf("node%d", i), rest.URI, s3.Endpoint)
		cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
		if err != nil {
			b.Fatal(err)
		}
		logs, err := os.Create(filepath.Join(dir, fmt.Sprintf("node%d.log", i)))
		if err != nil {
			b.Fatal(err)
		}
		s, err := server.New(context.Background(), cfg, server.Options{StorageDir: b.TempDir(), Logger: slogTo(logs)})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx, ln) }()
		b.Cleanup(func() { cancel(); <-done; logs.Close() })
	}
	return nodes, rest.URI
}

// childCPU is the CPU time (user and system) of this process's children
// whose command is comm, from /proc: versitygw serves the Iceberg files.
func childCPU(comm string) time.Duration {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		name, rest, ok := strings.Cut(string(raw), ") ")
		f := strings.Fields(rest)
		if !ok || len(f) < 13 || !strings.HasSuffix(name, "("+comm) || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += utime + stime
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// BenchmarkTrinoSluiceVsIceberg reads the same 3 × 300k rows with one
// statement through Trino three ways: hot (every row in the three nodes'
// stores, through the sluice catalog), then, after every node compacted
// all of them into the Iceberg table and removed them from its store,
// through Trino's Iceberg connector (iceberg.sluice.events, the table
// alone) and through the sluice catalog again (the coordinator's split
// reading the table). Every answer must equal what was produced. It
// reports rows/s wall and rows per CPU-second of Trino's JVM, of the nodes
// (this process) and of versitygw. Trino is started once.
func BenchmarkTrinoSluiceVsIceberg(b *testing.B) {
	coldtest.Require(b, coldtest.FindTrino())
	requirePlugin(b)
	const perNode, batch = 300_000, 50_000
	nodes, restURI := startVersusNodes(b)
	wantSum := 0
	for i, node := range nodes {
		for lo := i * perNode; lo < (i+1)*perNode; lo += batch {
			var body strings.Builder
			for n := lo; n < lo+batch; n++ {
				body.WriteString(versusRow(n) + "\n")
				wantSum += n
			}
			resp, err := http.Post(node+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(body.String()))
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("ingest into %s: status %d", node, resp.StatusCode)
			}
		}
	}
	want := fmt.Sprintf("[%d %d]", wantSum, 3*perNode)

	trino, err := coldtest.StartTrino(b.TempDir(), map[string]string{
		"sluice":  catalogFile(b, nodes[0]),
		"iceberg": icebergCatalogFile(b, restURI, sharedS3(b).Endpoint),
	}, pluginDir)
	coldtest.Require(b, err)
	defer trino.Stop()
	ctx := context.Background()

	read := func(name, table string) {
		b.Run(name, func(b *testing.B) {
			sql := "SELECT sum(n), count(*) FROM " + table
			if _, _, err := trino.Query(ctx, sql); err != nil { // warm-up
				b.Fatal(err)
			}
			trinoCPU, nodeCPU, s3CPU := trino.CPUTime(), processCPU(), childCPU("versitygw")
			b.ResetTimer()
			for range b.N {
				_, rows, err := trino.Query(ctx, sql)
				if err != nil {
					b.Fatal(err)
				}
				if len(rows) != 1 || fmt.Sprint(rows[0]) != want {
					b.Fatalf("%s: %v, want %s", sql, rows, want)
				}
			}
			rows := float64(b.N * 3 * perNode)
			b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
			for _, m := range []struct {
				unit string
				cpu  time.Duration
			}{
				{"trino-rows/cpu-s", trino.CPUTime() - trinoCPU},
				{"node-rows/cpu-s", processCPU() - nodeCPU},
				{"s3-rows/cpu-s", childCPU("versitygw") - s3CPU},
			} {
				if m.cpu > 0 {
					b.ReportMetric(rows/m.cpu.Seconds(), m.unit)
				}
			}
		})
	}

	read("hot/sluice", "sluice.cluster.events")

	// Every node commits all its rows into the table and removes them
	// from its store.
	began := time.Now()
	committed := int64(0)
	for _, node := range nodes {
		for tries := 0; hotRows(b, node) > 0; tries++ {
			if tries == 10 {
				b.Fatalf("node %s still holds rows after %d compactions", node, tries)
			}
			resp, err := http.Post(node+"/v1/tables/events/compact", "application/json", nil)
			if err != nil {
				b.Fatal(err)
			}
			var res struct {
				Rows  int64  `json:"rows"`
				Error string `json:"error"`
			}
			json.NewDecoder(resp.Body).Decode(&res)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("compact %s: status %d %s", node, resp.StatusCode, res.Error)
			}
			committed += res.Rows
		}
	}
	b.Logf("compacted %d rows into Iceberg in %v", committed, time.Since(began).Round(time.Millisecond))

	read("cold/iceberg", "iceberg.sluice.events")
	read("cold/sluice", "sluice.cluster.events")
}
