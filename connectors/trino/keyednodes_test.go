package trino_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/server"
)

// stateTableYAML is a keyed table (key id) fed by topic through group,
// Kafka tombstones as deletes; without a topic, the same table with no
// source.
func stateTableYAML(members []string, broker, topic, group string) string {
	source := ""
	if topic != "" {
		source = fmt.Sprintf(`
    sources:
      - kafka:
          brokers: [%s]
          topics: [%s]
          group: %s
          changes: {format: tombstones}`, broker, topic, group)
	}
	return fmt.Sprintf(`
cluster: {members: [%s], node_timeout: 20s}
tables:
  - name: state
    hashBy: id
    sortBy: ts
    primary_key: [id]
    schema:
      - {name: id, type: string}
      - {name: v, type: int64}
      - {name: ts, type: timestamp}%s
`, strings.Join(members, ", "), source)
}

// serveOn serves a node of yaml on addr with its store in dir until the
// returned stop is called (or the test ends).
func serveOn(t *testing.T, addr, dir, yaml string) (stop func()) {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(context.Background(), cfg, server.Options{StorageDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

// ownState is node's own query of the state table (its store alone,
// exact on its own): id → v.
func ownState(node string) (map[string]int64, error) {
	resp, err := http.Get(node + "/v1/tables/state/query?columns=id,v")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("%s: %s", resp.Status, b)
	}
	state := map[string]int64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var r struct {
			ID string `json:"id"`
			V  int64  `json:"v"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%.100s: %w", sc.Bytes(), err)
		}
		state[r.ID] = r.V
	}
	return state, sc.Err()
}

// waitOwnState waits, at most 90 s, until node's own query answers want.
func waitOwnState(t *testing.T, node string, want map[string]int64) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		got, err := ownState(node)
		if err == nil && maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: its store did not reach the topic's state (%d keys) within 90 s: %d keys, %v", node, len(want), len(got), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTrinoKeyedKeyOnTwoNodes reads a keyed table whose keys' changes
// reached two nodes' stores: both nodes consume one topic of upserts
// (each in a group of its own, so each stores every message at the same
// source positions), then node1 stops consuming (it restarts without its
// source, as a node whose partitions moved away keeps its store) and
// node0 alone takes the later changes: updates, keys updated twice, and
// tombstones. node1's store still holds the older row of every changed
// key and a row of every deleted one. Some keys both stores hold at the
// same position are then deleted over HTTP through node1 (such a delete
// keeps the position of the change it followed). Through a catalog on each node (each
// the coordinator of its lease), Trino must read the topic's final state
// key by key: each key once with its latest value, no deleted key. With a
// split per node and no merge by key, node1's older rows show.
func TestTrinoKeyedKeyOnTwoNodes(t *testing.T) {
	coldtest.Require(t, coldtest.FindTrino())
	requirePlugin(t)
	const topic, keys = "keyed-two-nodes", 300
	broker := sharedKafka(t).Addr
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if resp, err := kadm.NewClient(cl).CreateTopic(context.Background(), 3, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	final := map[string]int64{}
	seq := int64(0)
	produce := func(ids []int, tombstone bool) {
		t.Helper()
		var recs []*kgo.Record
		for _, i := range ids {
			seq++
			key := fmt.Sprintf("k%03d", i)
			rec := &kgo.Record{Topic: topic, Key: []byte(key)}
			if tombstone {
				delete(final, key)
			} else {
				ts := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).Add(time.Duration(seq) * time.Millisecond).Format(time.RFC3339Nano)
				rec.Value = fmt.Appendf(nil, `{"id":%q,"v":%d,"ts":%q}`, key, seq, ts)
				final[key] = seq
			}
			recs = append(recs, rec)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	pick := func(keep func(int) bool) []int {
		var ids []int
		for i := range keys {
			if keep(i) {
				ids = append(ids, i)
			}
		}
		return ids
	}
	produce(pick(func(int) bool { return true }), false)

	addrs := make([]string, 2)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = ln.Addr().String()
		ln.Close()
	}
	nodes := []string{"http://" + addrs[0], "http://" + addrs[1]}
	dirs := []string{t.TempDir(), t.TempDir()}
	serveOn(t, addrs[0], dirs[0], stateTableYAML(nodes, broker, topic, "trino-keyed-g0"))
	stop1 := serveOn(t, addrs[1], dirs[1], stateTableYAML(nodes, broker, topic, "trino-keyed-g1"))
	first := maps.Clone(final)
	waitOwnState(t, nodes[0], first)
	waitOwnState(t, nodes[1], first)
	stop1()
	serveOn(t, addrs[1], dirs[1], stateTableYAML(nodes, "", "", ""))

	produce(pick(func(i int) bool { return i%3 == 0 }), false)  // updated
	produce(pick(func(i int) bool { return i%9 == 0 }), false)  // updated twice
	produce(pick(func(i int) bool { return i%5 == 1 }), true)   // deleted
	produce(pick(func(i int) bool { return i%25 == 1 }), false) // deleted and written again
	waitOwnState(t, nodes[0], final)
	// Keys both stores hold at the same position, deleted over HTTP
	// through node1: the delete has no position of its own and keeps
	// that change's, so node0's copy of it is older than the delete.
	var body strings.Builder
	for _, i := range pick(func(i int) bool { return i%7 == 3 && i%3 != 0 && i%5 != 1 }) {
		key := fmt.Sprintf("k%03d", i)
		fmt.Fprintf(&body, "{\"id\":%q}\n", key)
		delete(final, key)
		delete(first, key)
	}
	req, err := http.NewRequest(http.MethodDelete, nodes[1]+"/v1/tables/state/rows", strings.NewReader(body.String()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("delete over HTTP: %s: %s", resp.Status, b)
	}
	if got, err := ownState(nodes[1]); err != nil || !maps.Equal(got, first) {
		t.Fatalf("node1's store is not the first changes less the HTTP deletes (%d keys, %v): the test needs its older rows", len(got), err)
	}

	trino := sharedTrino(t)
	for i, node := range nodes {
		cat := newCatalog(t, trino, "sluice", catalogFile(t, node))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		_, rows, err := trino.Query(ctx, "SELECT id, v FROM "+cat+".cluster.state")
		cancel()
		if err != nil {
			log, _ := os.ReadFile(trino.Log)
			t.Fatalf("%v\nTrino log (end): %s", err, log[max(0, len(log)-3000):])
		}
		got := map[string]int64{}
		var twice, deleted, stale, missing []string
		for _, r := range rows {
			id, _ := r[0].(string)
			v, err := r[1].(json.Number).Int64()
			if err != nil {
				t.Fatalf("v %v: %v", r[1], err)
			}
			if _, ok := got[id]; ok {
				twice = append(twice, id)
			}
			got[id] = v
			switch want, ok := final[id]; {
			case !ok:
				deleted = append(deleted, id)
			case want != v:
				stale = append(stale, id)
			}
		}
		for id := range final {
			if _, ok := got[id]; !ok {
				missing = append(missing, id)
			}
		}
		firstOf := func(s []string) []string { slices.Sort(s); s = slices.Compact(s); return s[:min(len(s), 6)] }
		if len(twice)+len(deleted)+len(stale)+len(missing) > 0 {
			t.Errorf("through node%d's catalog: %d rows for %d live keys: %d keys twice (first %v), %d deleted keys (first %v), %d older values (first %v), %d keys missing (first %v)",
				i, len(rows), len(final), len(twice), firstOf(twice), len(deleted), firstOf(deleted), len(stale), firstOf(stale), len(missing), firstOf(missing))
		}
	}
}
