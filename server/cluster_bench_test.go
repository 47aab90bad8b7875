package server

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkClusterQuery streams every row of a cluster of 1, 2 and 3 nodes
// (rowsPerNode each) through one coordinator, against the same query
// without cluster=true on one node: the cost of the fan-out and the copy.
// All nodes share this machine's cores, so the figures show the
// coordinator's overhead, not a cluster's scaling (docs/cluster.md).
func BenchmarkClusterQuery(b *testing.B) {
	const rowsPerNode = 100_000
	for _, n := range []int{1, 2, 3} {
		nodes := startCluster(b, n)
		for i, s := range nodes {
			benchFill(b, s.url, i*rowsPerNode, rowsPerNode)
		}
		for _, format := range []string{"ndjson", "arrow"} {
			if format == "arrow" && checkFormat("arrow") != nil {
				continue
			}
			cases := []string{"cluster"}
			if n == 1 {
				cases = []string{"node", "cluster"}
			}
			for _, c := range cases {
				b.Run(fmt.Sprintf("nodes=%d/%s/%s", n, c, format), func(b *testing.B) {
					url := nodes[0].url + "/v1/tables/events/query?format=" + format
					if c == "cluster" {
						url += "&cluster=true"
					}
					for range b.N {
						if got := benchRead(b, url); format == "ndjson" && got != n*rowsPerNode {
							b.Fatalf("%d rows, want %d", got, n*rowsPerNode)
						}
					}
					b.ReportMetric(float64(b.N*n*rowsPerNode)/b.Elapsed().Seconds(), "rows/s")
				})
			}
		}
		for _, s := range nodes {
			s.stop()
		}
	}
}

func benchFill(b testing.TB, url string, first, count int) {
	const batch = 20_000
	for lo := first; lo < first+count; lo += batch {
		var sb strings.Builder
		for i := lo; i < min(lo+batch, first+count); i++ {
			fmt.Fprintf(&sb, `{"user":"u%d","ts":"2026-11-26T10:%02d:%02dZ","n":%d}`+"\n", i%1000, (i/60)%60, i%60, i)
		}
		resp, err := http.Post(url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(sb.String()))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("ingest: %d", resp.StatusCode)
		}
	}
}

func benchRead(b testing.TB, url string) int {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		msg, _ := io.ReadAll(resp.Body)
		b.Fatalf("%s: %d %s", url, resp.StatusCode, msg)
	}
	if resp.Header.Get("Content-Type") != "application/x-ndjson" {
		n, _ := io.Copy(io.Discard, resp.Body)
		return int(n) // bytes, for formats whose rows are not lines
	}
	buf := make([]byte, 256<<10)
	rows := 0
	for {
		n, err := resp.Body.Read(buf)
		rows += strings.Count(string(buf[:n]), "\n")
		if err == io.EOF {
			return rows
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClusterKeyQuery is a key query (hash=one user: 200 rows per
// node) through the coordinator of three nodes; it reports the p50 and p99
// latency (target p99 ≤ 50 ms).
func BenchmarkClusterKeyQuery(b *testing.B) {
	nodes := startCluster(b, 3)
	for i, s := range nodes {
		benchFill(b, s.url, i*200_000, 200_000)
	}
	url := nodes[0].url + "/v1/tables/events/query?cluster=true&hash=u7"
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if rows := benchRead(b, url); rows != 600 {
			b.Fatalf("%d rows, want 600", rows)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
