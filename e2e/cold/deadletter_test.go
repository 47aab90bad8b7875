package cold

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/internal/testkafka"
	"github.com/sluicedb/sluice/server"
)

// deadLetterConfig is the node of TestDeadLettersInIcebergAndReplay: a
// Kafka-fed table whose computed column fails on ids ending in 3 unless
// fixed (on_error: deadletter), committed continuously to Iceberg.
func deadLetterConfig(t *testing.T, dir, broker, topic, catalog string, fixed bool) *config.Config {
	t.Helper()
	fn := `function main(row) if row.id % 10 == 3 then error("id ends in 3") end return row.id * 2 end`
	if fixed {
		fn = `function main(row) return row.id * 2 end`
	}
	yaml := fmt.Sprintf(`
storage: {dir: %q}
tables:
  - name: events
    sortBy: ts
    schema:
      - {name: id, type: int64}
      - {name: ts, type: timestamp}
    computed:
      - {name: twice, type: int64, on_error: deadletter, func: %q}
    sources:
      - kafka: {brokers: [%s], topics: [%s], group: dlq, session_timeout: 6s, metadata: [offset]}
    compact:
      interval: 1h
      after: 1h
      remove: true
      iceberg:
        warehouse: s3://%s/deadletters
        s3: {endpoint: %q, region: us-east-1, path_style: true}
        catalog: {uri: %q}
        node: a
        continuous: true
        orphan_interval: -1s
`, filepath.Join(dir, "data"), fn, broker, topic, coldtest.Bucket, s3.Endpoint, catalog)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// node is an in-process server serving on a loopback port until stop.
type dlNode struct {
	s    *server.Server
	url  string
	stop func()
}

func startDLNode(t *testing.T, cfg *config.Config) *dlNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := server.New(ctx, cfg, server.Options{Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		s.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	n := &dlNode{s: s, url: "http://" + ln.Addr().String()}
	stopped := false
	n.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("the server did not stop within a minute")
		}
	}
	t.Cleanup(n.stop)
	return n
}

// query returns the rows of table (both tiers) as sluice answers them.
func (n *dlNode) query(t *testing.T, table string, cols ...string) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var buf bytes.Buffer
	if _, err := n.s.Query(ctx, table, server.QueryRequest{Columns: cols}, &buf, "", func() {}); err != nil {
		t.Fatalf("query %s: %v", table, err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("query %s: %v: %s", table, err, sc.Bytes())
		}
		out = append(out, m)
	}
	return out
}

// deadLetters are the rows of events_deadletter that are dead letters
// (not replay records).
func deadLetters(rows []map[string]any) []map[string]any {
	var out []map[string]any
	for _, r := range rows {
		if of, _ := r["replay_of"].(string); of == "" {
			out = append(out, r)
		}
	}
	return out
}

// icebergRows reads cols of sluice.<table> with pyiceberg and, when its
// extensions are installed, DuckDB; it fails when the two disagree.
func icebergRows(t *testing.T, python *coldtest.PythonPool, catalog, table string, cols ...string) [][]any {
	t.Helper()
	script, err := os.ReadFile("testdata/rows.py")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := python.Run(ctx, string(script), append([]string{catalog, "sluice." + table, s3.Endpoint,
		coldtest.AccessKey, coldtest.SecretKey}, cols...)...)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		PyIceberg   [][]any `json:"pyiceberg"`
		DuckDB      [][]any `json:"duckdb"`
		DuckDBError string  `json:"duckdb_error"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("rows.py: %v: %s", err, out)
	}
	if r.DuckDBError != "" {
		t.Logf("DuckDB not checked: %s", r.DuckDBError)
	} else if a, b := sortedRows(r.PyIceberg), sortedRows(r.DuckDB); a != b {
		t.Fatalf("%s: pyiceberg and DuckDB disagree:\n%s\n%s", table, a, b)
	}
	return r.PyIceberg
}

func sortedRows(rows [][]any) string {
	s := make([]string, len(rows))
	for i, r := range rows {
		s[i] = fmt.Sprint(r...)
	}
	sort.Strings(s)
	return strings.Join(s, "\n")
}

// TestDeadLettersInIcebergAndReplay: the dead letters of a Kafka-fed table
// (a computed column failing, a message that is not JSON) are committed
// once to the Iceberg table events_deadletter with their source, reason
// and raw bytes (read back by sluice, pyiceberg and DuckDB), survive the
// node's store being deleted, and a replay after the fix stores each row
// once in events, however often it runs and when one is interrupted; the
// message that is still not JSON stays a dead letter with its new reason.
func TestDeadLettersInIcebergAndReplay(t *testing.T) {
	coldtest.Require(t, s3Err)
	py, err := coldtest.Python()
	coldtest.Require(t, err)
	// One interpreter for the test's checks: pyiceberg, pyarrow and
	// DuckDB imported once, not once a check.
	python := coldtest.NewPythonPool(py)
	defer python.Close()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	broker, err := testkafka.Start(ctx, filepath.Join(dir, "kafka"), 1)
	testenv.Require(t, err)
	defer broker.Kill()

	const topic = "dlq-events"
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	now := time.Now().UTC()
	const poison = `{"id": 100, "ts": ` // not JSON: a dead letter before and after the fix
	var recs []*kgo.Record
	for id := range 20 {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, `{"id":%d,"ts":%q}`, id, now.Add(time.Duration(id)*time.Millisecond).Format(time.RFC3339Nano))})
		if id == 10 {
			recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(poison)})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	// The poison message is the 12th (offset 11), ids 3 and 13 at offsets 3 and 14.
	catalog := filepath.Join(dir, "catalog.db") // the shared catalog: outside the node's store
	nodeDir := filepath.Join(dir, "node")
	n := startDLNode(t, deadLetterConfig(t, nodeDir, broker.Addr, topic, catalog, false))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		stored := len(n.query(t, "events", "id"))
		dead := len(deadLetters(n.query(t, "events_deadletter", "id", "replay_of")))
		if stored == 18 && dead == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 2 min: %d rows and %d dead letters, want 18 and 3", stored, dead)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, tbl := range []string{"events", "events_deadletter"} {
		if _, err := n.s.CompactNow(ctx, tbl); err != nil {
			t.Fatalf("compact %s: %v", tbl, err)
		}
	}
	n.stop()

	// In Iceberg, each once, with its source, reason and raw bytes.
	origin := regexp.MustCompile(`^kafka ` + topic + `/0@(\d+)$`)
	checkCommitted := func(rows [][]any) {
		t.Helper()
		byOffset := map[string][]any{}
		for _, r := range rows {
			m := origin.FindStringSubmatch(fmt.Sprint(r[1]))
			if m == nil {
				t.Fatalf("dead letter %v: origin %q is no Kafka topic/partition@offset", r, r[1])
			}
			if _, dup := byOffset[m[1]]; dup {
				t.Fatalf("dead letter at offset %s committed twice: %v", m[1], rows)
			}
			byOffset[m[1]] = r
		}
		if len(byOffset) != 3 {
			t.Fatalf("%d dead letters in Iceberg, want 3: %v", len(byOffset), rows)
		}
		for off, want := range map[string]string{"3": "id ends in 3", "14": "id ends in 3", "11": "line 1"} {
			r, ok := byOffset[off]
			if !ok || !strings.Contains(fmt.Sprint(r[2]), want) {
				t.Fatalf("dead letter at offset %s: %v, want the reason %q", off, r, want)
			}
		}
		if raw := fmt.Sprint(byOffset["11"][3]); raw != poison {
			t.Fatalf("the poison message's dead letter holds %q, want its raw bytes %q", raw, poison)
		}
	}
	checkCommitted(icebergRows(t, python, catalog, "events_deadletter", "id", "origin", "error", "row"))

	// The node's store is lost; the dead letters are not. The fixed
	// script is deployed and the node starts on an empty store.
	if err := os.RemoveAll(filepath.Join(nodeDir, "data")); err != nil {
		t.Fatal(err)
	}
	n = startDLNode(t, deadLetterConfig(t, nodeDir, broker.Addr, topic, catalog, true))
	var fromSluice [][]any
	for _, r := range deadLetters(n.query(t, "events_deadletter", "id", "origin", "error", "row", "replay_of")) {
		fromSluice = append(fromSluice, []any{r["id"], r["origin"], r["error"], r["row"]})
	}
	checkCommitted(fromSluice)

	// A replay interrupted after its first dead letter (one per batch),
	// then the same replay through the API, then once more: each dead
	// letter is taken once.
	errStop := errors.New("interrupted by the test")
	first, firstErr := n.s.Replay(ctx, "events", server.ReplayOptions{Letters: 1, Progress: func(server.ReplayResult) error { return errStop }})
	client := &server.Client{URL: n.url}
	second, err := client.Replay(ctx, "events", server.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	third, err := n.s.Replay(ctx, "events", server.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkOnce := func(ids []int64) {
		t.Helper()
		seen := map[int64]int{}
		for _, id := range ids {
			seen[id]++
		}
		for id := range int64(20) {
			if seen[id] != 1 {
				t.Fatalf("id %d is held %d times, want once (%d rows)", id, seen[id], len(ids))
			}
		}
		if len(ids) != 20 {
			t.Fatalf("%d rows, want 20", len(ids))
		}
	}
	var ids []int64
	for _, r := range n.query(t, "events", "id", "twice") {
		id := int64(r["id"].(float64))
		if tw, _ := r["twice"].(float64); int64(tw) != 2*id {
			t.Fatalf("row %v: twice is not 2*id", r)
		}
		ids = append(ids, id)
	}
	checkOnce(ids)
	if !errors.Is(firstErr, errStop) || first.Replayed+first.Failed != 1 {
		t.Fatalf("interrupted replay: %+v, %v; want one dead letter taken and the hook's error", first, firstErr)
	}
	// Which dead letter the interrupted replay took depends on their ids;
	// the poison message fails each time, a new dead letter each time.
	if second.Done != 1 || first.Replayed+second.Replayed != 2 || second.Failed != 1 {
		t.Fatalf("second replay: %+v after %+v, want the dead letters the first left, 1 done, ids 3 and 13 replayed once", second, first)
	}
	if third.Replayed != 0 || third.Failed != 1 || third.Rows != 0 || third.Done != 3+first.Failed {
		t.Fatalf("third replay: %+v, want only the poison message's newest dead letter, failing again", third)
	}
	for _, tbl := range []string{"events", "events_deadletter"} {
		if _, err := n.s.CompactNow(ctx, tbl); err != nil {
			t.Fatalf("compact %s: %v", tbl, err)
		}
	}
	ids = ids[:0]
	for _, r := range icebergRows(t, python, catalog, "events", "id") {
		ids = append(ids, int64(r[0].(float64)))
	}
	checkOnce(ids)
	// The dead-letter table: each original once with one replay record;
	// the poison message's body in a new dead letter with its new reason.
	records := map[string]int{}
	var again []string
	for _, r := range icebergRows(t, python, catalog, "events_deadletter", "id", "replay_of", "error", "row") {
		if of := fmt.Sprint(r[1]); r[1] != nil && of != "" {
			records[of]++
		} else if fmt.Sprint(r[3]) == poison && !strings.Contains(fmt.Sprint(r[2]), "line 1") {
			t.Fatalf("poison dead letter %v: a reason that is not the decoder's", r)
		} else if fmt.Sprint(r[3]) == poison {
			again = append(again, fmt.Sprint(r[0]))
		}
	}
	for id, k := range records {
		if k != 1 {
			t.Fatalf("dead letter %s has %d replay records, want 1", id, k)
		}
	}
	failed := first.Failed + second.Failed + third.Failed // each a new dead letter of the poison message
	if len(records) != 3+failed-1 || len(again) != 1+failed {
		t.Fatalf("%d replay records and %d dead letters of the poison message, want %d (3 originals and the retries taken) and %d (the original and its retries)",
			len(records), len(again), 3+failed-1, 1+failed)
	}
}
