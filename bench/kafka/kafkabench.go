package kafkabench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/freeport"
	"github.com/sluicedb/sluice/internal/procmem"
	"github.com/sluicedb/sluice/internal/testkafka"
	"github.com/sluicedb/sluice/internal/testnode"
)

// Options configure a run.
type Options struct {
	// Brokers of an existing cluster; empty starts a broker.
	Brokers []string
	// Sluice is the sluice binary to run as nodes (default: this
	// executable), with SluiceArgs before its serve command: sluice-bench
	// runs its own hidden `sluice` command, the sluice command tree.
	Sluice     string
	SluiceArgs []string
	// Rows pre-produced for each throughput case (default 1,000,000).
	Rows int
	// Partitions of each topic (default 4).
	Partitions int
	// Users is the number of distinct hashBy values (default 10, as in
	// `sluice bench ingest`; 1000 makes most blocks hold one or two rows).
	Users int
	// Rate of the latency and steady cases in rows/s (default 50,000) for
	// LatencyFor (default 10s).
	Rate       int
	LatencyFor time.Duration
	// Cases among none, lua, http, latency, 2nodes, steady, avro, protobuf,
	// json_schema (default all but steady and the registry formats). avro,
	// protobuf and json_schema are none's rows in the Schema Registry wire
	// format, with a registry the
	// run starts (internal/testregistry).
	Cases []string
	// Dir holds the broker and the stores (default a temporary directory).
	Dir string
	Log io.Writer
	// CPUProfile, when set, receives a CPU profile of the first node of
	// each consuming case (name suffixed with the case), ProfileFor long
	// (default 3 s) from its first row stored.
	CPUProfile string
	ProfileFor time.Duration
}

// Result is one case's figures.
type Result struct {
	Case       string
	Rows       int64
	Seconds    float64
	RowsPerSec float64
	// PeakRSS is the largest peak RSS (VmHWM) among the case's nodes.
	PeakRSS int64
	// CPUSeconds is the nodes' CPU time (user+sys) for the case, from
	// their start (group join and the first poll included) to their exit;
	// rows/CPU-s divides Rows by it, which on a shared machine moves less
	// than rows/s.
	CPUSeconds float64
	// P50 and P99 are produce-to-queryable latencies (latency case).
	P50, P99 time.Duration
	Note     string
}

const schema = `    hashBy: user
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
`

const luaColumn = `    computed:
      - name: score2
        type: float64
        func: "function main(row) return row.score * 2 end"
`

// nodeConfig is a node's config; format is extra entries of the Kafka
// source's flow mapping (a format and its registry).
func nodeConfig(brokers []string, topic, group, instance, computed, format string) string {
	src := ""
	if topic != "" {
		src = fmt.Sprintf(`    sources:
      - kafka: {brokers: [%s], topics: [%s], group: %s, instance_id: %q, session_timeout: 6s%s}
`, strings.Join(brokers, ", "), topic, group, instance, format)
	}
	return "listen: {pprof: true}\nlimits: {max_inflight: 64, max_body_bytes: 268435456}\ntables:\n  - name: bench\n" + schema + computed + src
}

// message is the k-th 10-field row of users users.
func message(buf []byte, k, users int) []byte {
	actions := [...]string{"view", "buy", "click", "share"}
	countries := [...]string{"SG", "ID", "MY", "TH", "VN", "PH"}
	devices := [...]string{"ios", "android", "web"}
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	ts := base.Add(time.Duration(k) * 37 * time.Millisecond)
	return fmt.Appendf(buf, `{"time":"%s","user":"u%d","action":"%s","country":"%s","device":"%s","amount":%d.%02d,"score":%d.5,"count":%d,"session":%d,"ok":%t}`,
		ts.Format(time.RFC3339Nano), k%users, actions[k%4], countries[k%6], devices[k%3], k%500, k%100, k%97, k%13, k/7, k%2 == 0)
}

// Run runs the cases.
func Run(ctx context.Context, opts Options) ([]Result, error) {
	if opts.Rows <= 0 {
		opts.Rows = 1_000_000
	}
	if opts.Partitions <= 0 {
		opts.Partitions = 4
	}
	if opts.Users <= 0 {
		opts.Users = 10
	}
	if opts.Rate <= 0 {
		opts.Rate = 50_000
	}
	if opts.ProfileFor <= 0 {
		opts.ProfileFor = 3 * time.Second
	}
	if opts.LatencyFor <= 0 {
		opts.LatencyFor = 10 * time.Second
	}
	if len(opts.Cases) == 0 {
		opts.Cases = []string{"none", "lua", "http", "latency", "2nodes"}
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Sluice == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		opts.Sluice = exe
	}
	dir := opts.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "sluice-bench-kafka-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	if len(opts.Brokers) == 0 {
		fmt.Fprintln(opts.Log, "starting a Kafka broker")
		b, err := testkafka.Start(ctx, filepath.Join(dir, "kafka"), opts.Partitions)
		if err != nil {
			return nil, err
		}
		defer b.Kill()
		opts.Brokers = []string{b.Addr}
	}
	b := &bench{opts: opts, dir: dir}
	var out []Result
	for _, c := range opts.Cases {
		var res Result
		var err error
		switch c {
		case "none":
			res, err = b.consume(ctx, c, "", 1)
		case "lua":
			res, err = b.consume(ctx, c, luaColumn, 1)
		case "2nodes":
			res, err = b.consume(ctx, c, "", 2)
		case "avro", "protobuf", "json_schema":
			res, err = b.consumeRegistry(ctx, c)
		case "http":
			res, err = b.http(ctx)
		case "latency":
			res, err = b.latency(ctx)
		case "steady":
			res, err = b.steady(ctx)
		default:
			err = fmt.Errorf("unknown case %q (want none, lua, http, latency, 2nodes, steady, avro, protobuf, json_schema)", c)
		}
		if err != nil {
			return out, fmt.Errorf("case %s: %w", c, err)
		}
		fmt.Fprintln(opts.Log, Format([]Result{res}))
		out = append(out, res)
	}
	return out, nil
}

type bench struct {
	opts   Options
	dir    string
	topics int
}

func (b *bench) client(extra ...kgo.Opt) (*kgo.Client, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(b.opts.Brokers...), kgo.ProducerBatchMaxBytes(1 << 20), kgo.ProducerLinger(5 * time.Millisecond),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression())}, extra...)
	return kgo.NewClient(opts...)
}

// newTopic creates a fresh topic and pre-produces rows messages to it.
func (b *bench) newTopic(ctx context.Context, rows int) (string, error) {
	return b.newTopicOf(ctx, rows, func(k int) []byte { return message(nil, k, b.opts.Users) })
}

// newTopicOf makes a topic of rows messages, the k-th encode(k).
func (b *bench) newTopicOf(ctx context.Context, rows int, encode func(k int) []byte) (string, error) {
	b.topics++
	topic := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), b.topics)
	cl, err := b.client()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(b.opts.Partitions), 1, nil, topic); err != nil || resp.Err != nil {
		return "", fmt.Errorf("create topic: %v %v", err, resp.Err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for k := range rows {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: encode(k)}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstErr = cmp(firstErr, err)
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	return topic, firstErr
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// node is a sluice serve child, run by the tests' process harness.
type node struct {
	*testnode.Node
}

func (b *bench) start(name, cfg string) (*node, error) {
	port, err := freeport.Port()
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(b.dir, name+".yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := append(append([]string{b.opts.Sluice}, b.opts.SluiceArgs...), "serve", "--config", cfgPath, "--data", filepath.Join(b.dir, name), "--listen", addr, "--log-level", "warn")
	n := &node{&testnode.Node{Name: name, URL: "http://" + addr, Log: filepath.Join(b.dir, name+".log"), Command: args}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Launch(ctx); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return n, nil
}

// stop stops the node (SIGTERM, killed after a minute) and returns its
// peak RSS and CPU time.
func (n *node) stop() (rss int64, cpu time.Duration) {
	rss, _ = procmem.Status(n.Pid(), "VmHWM")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n.Stop(ctx) // the figures stand whether or not it exits cleanly
	if st := n.ProcessState(); st != nil {
		cpu = st.UserTime() + st.SystemTime()
	}
	return rss, cpu
}

// metric sums the samples of a metric family.
func (n *node) metric(name string) float64 {
	resp, err := http.Get(n.URL + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			sum += v
		}
	}
	return sum
}

// consume pre-produces Rows messages, starts nodes, and times from the
// first row stored to the last (the group join before is not counted).
func (b *bench) consume(ctx context.Context, name, computed string, nodes int) (Result, error) {
	fmt.Fprintf(b.opts.Log, "case %s: producing %d messages\n", name, b.opts.Rows)
	topic, err := b.newTopic(ctx, b.opts.Rows)
	if err != nil {
		return Result{}, err
	}
	return b.consumeTopic(name, topic, computed, "", nodes)
}

// consumeTopic runs nodes consuming topic until every row is stored.
func (b *bench) consumeTopic(name, topic, computed, format string, nodes int) (Result, error) {
	group := "bench-" + topic
	var ns []*node
	for i := range nodes {
		n, err := b.start(fmt.Sprintf("%s-node%d", name, i+1), nodeConfig(b.opts.Brokers, topic, group, fmt.Sprintf("node-%d", i+1), computed, format))
		if err != nil {
			return Result{}, err
		}
		ns = append(ns, n)
	}
	total := func() float64 {
		s := 0.0
		for _, n := range ns {
			s += n.metric("sluice_source_rows_accepted_total")
		}
		return s
	}
	var first time.Time
	var firstRows float64
	deadline := time.Now().Add(10 * time.Minute)
	var last float64
	for time.Now().Before(deadline) {
		last = total()
		if first.IsZero() && last > 0 {
			first, firstRows = time.Now(), last
			if b.opts.CPUProfile != "" {
				go profileFor(ns[0].URL, b.opts.CPUProfile+"."+name, max(1, int(b.opts.ProfileFor.Seconds())))
			}
		}
		if last >= float64(b.opts.Rows) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	end := time.Now()
	res := Result{Case: name, Rows: int64(last - firstRows), Seconds: end.Sub(first).Seconds()}
	for _, n := range ns {
		rss, cpu := n.stop()
		res.PeakRSS = max(res.PeakRSS, rss)
		res.CPUSeconds += cpu.Seconds()
	}
	if last < float64(b.opts.Rows) {
		return res, fmt.Errorf("only %v of %d rows stored in 10 minutes", last, b.opts.Rows)
	}
	res.RowsPerSec = float64(res.Rows) / res.Seconds
	if nodes > 1 {
		res.Note = fmt.Sprintf("%d nodes on one 2-core machine (with the broker): contention, not scaling", nodes)
	}
	return res, nil
}

// http posts the same rows (NDJSON batches of 1000 rows, 4 clients) to a
// node without sources.
func (b *bench) http(ctx context.Context) (Result, error) {
	n, err := b.start("http-node", nodeConfig(nil, "", "", "", "", ""))
	if err != nil {
		return Result{}, err
	}
	const batch = 1000
	var bodies [][]byte
	for k := 0; k < b.opts.Rows; k += batch {
		var buf []byte
		for i := k; i < min(k+batch, b.opts.Rows); i++ {
			buf = append(message(buf, i, b.opts.Users), '\n')
		}
		bodies = append(bodies, buf)
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	next := make(chan []byte)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for body := range next {
				resp, err := http.Post(n.URL+"/v1/tables/bench/rows", "application/x-ndjson", bytes.NewReader(body))
				if err != nil {
					errs <- err
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("ingest: %s", resp.Status)
				}
			}
		}()
	}
	for _, body := range bodies {
		next <- body
	}
	close(next)
	wg.Wait()
	secs := time.Since(start).Seconds()
	rss, cpu := n.stop()
	select {
	case err := <-errs:
		return Result{}, err
	default:
	}
	return Result{Case: "http", Rows: int64(b.opts.Rows), Seconds: secs, RowsPerSec: float64(b.opts.Rows) / secs, PeakRSS: rss, CPUSeconds: cpu.Seconds(),
		Note: "same rows over HTTP, 4 clients, 1000-row batches"}, nil
}

// latency produces Rate rows/s for LatencyFor while a node consumes them;
// every 100 ms one probe row (its own user) is produced and its
// produce-to-queryable time measured by polling a one-partition query.
func (b *bench) latency(ctx context.Context) (Result, error) {
	topic, err := b.newTopic(ctx, 0)
	if err != nil {
		return Result{}, err
	}
	n, err := b.start("latency-node", nodeConfig(b.opts.Brokers, topic, "bench-"+topic, "node-1", "", ""))
	if err != nil {
		return Result{}, err
	}
	cl, err := b.client(kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		n.stop()
		return Result{}, err
	}
	defer cl.Close()
	// Wait until the node has joined: a first probe must become queryable.
	if _, err := b.probe(ctx, cl, n, topic, -1, time.Minute); err != nil {
		n.stop()
		return Result{}, fmt.Errorf("first probe: %w", err)
	}
	lctx, cancel := context.WithTimeout(ctx, b.opts.LatencyFor)
	defer cancel()
	var produced int64
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		per := b.opts.Rate / 100
		k := 0
		for {
			select {
			case <-lctx.Done():
				return
			case <-tick.C:
			}
			for range per {
				cl.Produce(lctx, &kgo.Record{Topic: topic, Value: message(nil, k, b.opts.Users)}, nil)
				k++
			}
			produced = int64(k)
		}
	}()
	var lat []time.Duration
	begin := time.Now()
	for i := 0; lctx.Err() == nil; i++ {
		d, err := b.probe(ctx, cl, n, topic, i, 30*time.Second)
		if err != nil {
			n.stop()
			return Result{}, err
		}
		lat = append(lat, d)
		time.Sleep(max(0, 100*time.Millisecond-d))
	}
	secs := time.Since(begin).Seconds()
	rss, cpu := n.stop()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	res := Result{Case: "latency", Rows: produced, Seconds: secs, RowsPerSec: float64(produced) / secs, PeakRSS: rss, CPUSeconds: cpu.Seconds(),
		Note: fmt.Sprintf("%d probes at %d rows/s offered", len(lat), b.opts.Rate)}
	if len(lat) > 0 {
		res.P50, res.P99 = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return res, nil
}

// steady produces Rate rows/s for LatencyFor while a node consumes them,
// with nothing else asking the node anything, and counts the node's CPU
// time from after its group join (its first row stored) to its last row
// stored: the cost per row at a moderate, steady rate, where per-poll and
// per-commit costs weigh more than in the bulk cases.
func (b *bench) steady(ctx context.Context) (Result, error) {
	topic, err := b.newTopic(ctx, 0)
	if err != nil {
		return Result{}, err
	}
	n, err := b.start("steady-node", nodeConfig(b.opts.Brokers, topic, "bench-"+topic, "node-1", "", ""))
	if err != nil {
		return Result{}, err
	}
	cl, err := b.client(kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		n.stop()
		return Result{}, err
	}
	defer cl.Close()
	stored := func() float64 { return n.metric("sluice_source_rows_accepted_total") }
	waitFor := func(rows float64, timeout time.Duration) error {
		for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if stored() >= rows {
				return nil
			}
		}
		return fmt.Errorf("%v of %v rows stored after %v", stored(), rows, timeout)
	}
	// The group join: a first row must be stored.
	cl.Produce(ctx, &kgo.Record{Topic: topic, Value: message(nil, 0, b.opts.Users)}, nil)
	if err := waitFor(1, time.Minute); err != nil {
		n.stop()
		return Result{}, fmt.Errorf("first row: %w", err)
	}
	cpu0 := n.CPUSeconds()
	begin := time.Now()
	if b.opts.CPUProfile != "" {
		go profileFor(n.URL, b.opts.CPUProfile+".steady", max(1, int(b.opts.LatencyFor.Seconds())-1))
	}
	produced := 1
	tick := time.NewTicker(10 * time.Millisecond)
	per := max(1, b.opts.Rate/100)
	lctx, cancel := context.WithTimeout(ctx, b.opts.LatencyFor)
	for lctx.Err() == nil {
		select {
		case <-lctx.Done():
		case <-tick.C:
			for range per {
				cl.Produce(ctx, &kgo.Record{Topic: topic, Value: message(nil, produced, b.opts.Users)}, nil)
				produced++
			}
		}
	}
	cancel()
	tick.Stop()
	if err := cl.Flush(ctx); err != nil {
		n.stop()
		return Result{}, err
	}
	if err := waitFor(float64(produced), time.Minute); err != nil {
		n.stop()
		return Result{}, err
	}
	secs := time.Since(begin).Seconds()
	cpu := n.CPUSeconds() - cpu0
	rss, _ := n.stop()
	rows := int64(produced - 1)
	return Result{Case: "steady", Rows: rows, Seconds: secs, RowsPerSec: float64(rows) / secs, PeakRSS: rss, CPUSeconds: cpu,
		Note: fmt.Sprintf("%d rows/s offered; CPU s from the first row stored to the last", b.opts.Rate)}, nil
}

// probe produces one row of user "probe<i>" and polls the node until a
// query of that partition returns it.
func (b *bench) probe(ctx context.Context, cl *kgo.Client, n *node, topic string, i int, timeout time.Duration) (time.Duration, error) {
	user := fmt.Sprintf("probe%d", i)
	ts := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	v := fmt.Appendf(nil, `{"time":%q,"user":%q,"action":"probe","country":"SG","device":"web","amount":1.0,"score":1.5,"count":1,"session":1,"ok":true}`, ts.Format(time.RFC3339), user)
	start := time.Now()
	cl.Produce(ctx, &kgo.Record{Topic: topic, Value: v}, nil)
	q := n.URL + "/v1/tables/bench/query?" + url.Values{"hash": {user}, "columns": {"user"}, "format": {"ndjson"}}.Encode()
	for time.Since(start) < timeout {
		resp, err := http.Get(q)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if bytes.Contains(body, []byte(user)) {
				return time.Since(start), nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0, fmt.Errorf("probe %s not queryable after %v", user, timeout)
}

// Format prints results as a table.
func Format(rs []Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %10s %8s %12s %9s %8s %12s %9s %9s  %s\n", "case", "rows", "seconds", "rows/s", "RSS MB", "CPU s", "rows/CPU-s", "p50 ms", "p99 ms", "note")
	for _, r := range rs {
		perCPU := 0.0
		if r.CPUSeconds > 0 {
			perCPU = float64(r.Rows) / r.CPUSeconds
		}
		fmt.Fprintf(&b, "%-8s %10d %8.2f %12.0f %9.1f %8.2f %12.0f %9.1f %9.1f  %s\n", r.Case, r.Rows, r.Seconds, r.RowsPerSec, float64(r.PeakRSS)/(1<<20), r.CPUSeconds, perCPU,
			float64(r.P50)/float64(time.Millisecond), float64(r.P99)/float64(time.Millisecond), r.Note)
	}
	return strings.TrimRight(b.String(), "\n")
}

// profile saves a 3-second CPU profile of the node at url.
// profileFor writes a CPU profile of seconds seconds of the node at url.
func profileFor(url, path string, seconds int) {
	resp, err := http.Get(url + "/debug/pprof/profile?seconds=" + strconv.Itoa(seconds))
	if err != nil {
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	io.Copy(f, resp.Body)
}
