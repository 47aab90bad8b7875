package coldcluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/testkafka"
)

// BenchmarkFreshness measures produce → visible to DuckDB: three nodes in
// one group on a 4-partition topic, continuous commits every
// SLUICE_FRESHNESS_INTERVAL (default 10s), SLUICE_FRESHNESS_RATE rows/s
// offered (default 50000) for SLUICE_FRESHNESS_SECONDS (default 60). Every
// 100 ms a probe row (id >= 1e9) is produced and its time kept; a Python
// poller (testdata/poll.py) loads the table's metadata every 200 ms and,
// on each new snapshot, reads the probes with DuckDB's iceberg_scan. A
// probe's latency runs from its produce call to the end of the DuckDB
// query that first returned it. It runs once whatever b.N is:
//
//	go test -run '^$' -bench Freshness -benchtime 1x ./e2e/coldcluster/
func BenchmarkFreshness(b *testing.B) {
	coldtest.Require(b, s3Err)
	coldtest.Require(b, pyErr)
	broker := testkafka.Require(b)
	rate := envInt("SLUICE_FRESHNESS_RATE", 50000)
	seconds := envInt("SLUICE_FRESHNESS_SECONDS", 60)
	interval := envInt("SLUICE_FRESHNESS_INTERVAL", 10)
	dir := b.TempDir()
	topic := fmt.Sprintf("fresh_%d_%d", os.Getpid(), time.Now().UnixNano())
	adm, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr))
	if err != nil {
		b.Fatal(err)
	}
	defer adm.Close()
	if resp, err := kadm.NewClient(adm).CreateTopic(context.Background(), 4, 1, nil, topic); err != nil || resp.Err != nil {
		b.Fatalf("create topic: %v %v", err, resp.Err)
	}
	catalog := filepath.Join(dir, "catalog.db")
	prefix := "fresh-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var nodes []*node
	for i := range 3 {
		n := newNode(b, dir, fmt.Sprintf("node-%d", i), broker.Addr, topic, topic, catalog, prefix)
		cfg, _ := os.ReadFile(n.Config)
		cfg = []byte(strings.Replace(string(cfg), "interval: 1s", fmt.Sprintf("interval: %ds", interval), 1))
		cfg = []byte(strings.Replace(string(cfg), "after: 2s", "after: 1h", 1))
		cfg = []byte(strings.Replace(string(cfg), `listen: {http:`, `listen: {pprof: true, http:`, 1))
		if span := os.Getenv("SLUICE_FRESHNESS_BLOCK_SPAN"); span != "" {
			cfg = []byte(strings.Replace(string(cfg), "    hashBy: user", "    block_span: "+span+"\n    hashBy: user", 1))
		}
		if err := os.WriteFile(n.Config, cfg, 0o644); err != nil {
			b.Fatal(err)
		}
		n.Start(b)
		nodes = append(nodes, n)
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer producer.Close()
	// Let the group settle before measuring.
	time.Sleep(8 * time.Second)

	script, err := os.ReadFile("testdata/poll.py")
	if err != nil {
		b.Fatal(err)
	}
	const probeBase = 1_000_000_000
	poll := exec.Command(python, "-c", string(script), catalog, "sluice.events", s3.Endpoint, coldtest.AccessKey,
		coldtest.SecretKey, strconv.Itoa(seconds+3*interval+30), strconv.Itoa(probeBase))
	out, err := poll.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	poll.Stderr = os.Stderr
	if err := poll.Start(); err != nil {
		b.Fatal(err)
	}
	defer poll.Process.Kill()
	var mu sync.Mutex
	seen := map[int64]float64{} // probe id → unix seconds visible
	var pollDone sync.WaitGroup
	pollDone.Go(func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var line struct {
				T   float64 `json:"t"`
				IDs []int64 `json:"ids"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil {
				mu.Lock()
				for _, id := range line.IDs {
					seen[id] = line.T
				}
				mu.Unlock()
			}
		}
	})

	cpuBefore := nodesCPU(nodes)
	start := time.Now()
	if path := os.Getenv("SLUICE_FRESHNESS_PROFILE"); path != "" {
		// node-0's CPU profile over the middle of the run.
		go func() {
			time.Sleep(time.Duration(seconds) * time.Second / 4)
			resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", nodes[0].URL, seconds/2))
			if err != nil {
				b.Logf("profile: %v", err)
				return
			}
			defer resp.Body.Close()
			buf, _ := io.ReadAll(resp.Body)
			os.WriteFile(path, buf, 0o644)
		}()
	}
	var produced, failed atomic.Int64
	sent := map[int64]time.Time{}
	ctx := context.Background()
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.Add(1)
		}
	}
	const batch = 500
	tick := time.NewTicker(time.Second * batch / time.Duration(rate))
	probeTick := time.NewTicker(100 * time.Millisecond)
	id, probe := int64(0), int64(probeBase)
	for time.Since(start) < time.Duration(seconds)*time.Second {
		select {
		case <-tick.C:
			for range batch {
				user := "u" + strconv.FormatInt(id%1000, 10)
				producer.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(user),
					Value: fmt.Appendf(nil, `{"id":%d,"user":%q,"ts":%q}`, id, user, time.Now().UTC().Format(time.RFC3339Nano))}, done)
				id++
			}
			produced.Add(batch)
		case <-probeTick.C:
			sent[probe] = time.Now()
			producer.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte("probe"),
				Value: fmt.Appendf(nil, `{"id":%d,"user":"probe","ts":%q}`, probe, time.Now().UTC().Format(time.RFC3339Nano))}, done)
			probe++
		}
	}
	tick.Stop()
	probeTick.Stop()
	producer.Flush(ctx)
	offered := time.Since(start)
	// Wait for the last probes (at most three intervals and a margin).
	deadline := time.Now().Add(time.Duration(3*interval+20) * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == len(sent) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	cpu := nodesCPU(nodes) - cpuBefore
	retries := 0.0
	for _, n := range nodes {
		retries += metric(n, "sluice_coldtier_commit_retries_total")
	}
	poll.Process.Kill()
	pollDone.Wait()
	var lat []float64
	missing := 0
	for p, at := range sent {
		t, ok := seen[p]
		if !ok {
			missing++
			continue
		}
		lat = append(lat, t-float64(at.UnixNano())/1e9)
	}
	slices.Sort(lat)
	pct := func(q float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(q*float64(len(lat))))]
	}
	r := count(b, catalog)
	b.ReportMetric(pct(0.5), "p50-s")
	b.ReportMetric(pct(0.99), "p99-s")
	b.ReportMetric(float64(produced.Load())/offered.Seconds(), "rows/s-offered")
	b.Logf("rate %d rows/s offered (%d rows in %.1f s, %d produce errors), interval %d s: %d probes, %d not seen; "+
		"produce→DuckDB p50 %.2f s, p90 %.2f s, p99 %.2f s, max %.2f s; %d snapshots, %d rows in the table when the last probe was seen; "+
		"nodes' CPU %.1f s (%.0f rows per CPU-second)",
		rate, produced.Load(), offered.Seconds(), failed.Load(), interval, len(sent), missing,
		pct(0.5), pct(0.9), pct(0.99), pct(1), r.Snapshots, r.PyIceberg.Rows, cpu, float64(produced.Load())/cpu)
	var runs []float64
	for _, n := range nodes {
		runs = append(runs, runSeconds(n)...)
	}
	slices.Sort(runs)
	if len(runs) > 0 {
		b.Logf("%d runs with rows: seconds p50 %.2f, p90 %.2f, max %.2f; %.0f commit retries", len(runs),
			runs[len(runs)/2], runs[len(runs)*9/10], runs[len(runs)-1], retries)
	}
}

// metric reads one unlabelled-per-table metric of a node (summed).
func metric(n *node, name string) float64 {
	resp, err := http.Get(n.URL + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// runSeconds are the durations of a node's runs that committed rows, from
// its log.
func runSeconds(n *node) []float64 {
	b, _ := os.ReadFile(n.Log)
	var out []float64
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.Contains(line, "compacted to iceberg") {
			continue
		}
		var rec struct {
			Seconds float64 `json:"seconds"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Seconds > 0 {
			out = append(out, rec.Seconds)
		}
	}
	return out
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// nodesCPU is the user+system CPU seconds of the nodes' processes.
func nodesCPU(nodes []*node) float64 {
	total := 0.0
	for _, n := range nodes {
		total += n.CPUSeconds()
	}
	return total
}
