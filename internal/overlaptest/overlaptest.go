// Package overlaptest makes the failover overlap on purpose, for the
// tests that read it through different clients (a cluster query and a read
// lease in e2e/cluster, Trino through the connector in connectors/trino):
// two nodes in one Kafka consumer group share one Iceberg table; node0
// stores every message of a topic and is killed with SIGKILL before its
// offsets are committed (the group's offsets go back to the start), node1
// reads every message again, and node0 restarts on its store. Both stores
// then hold every message, none committed to the table.
package overlaptest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/freeport"
	"github.com/sluicedb/sluice/internal/testnode"
)

// Nodes makes n node processes (not started) consuming topic in group
// into one Iceberg table (a local warehouse and SQLite catalog they share),
// each committing only on demand, each listing the others as cluster
// members; readerTimeout is their cluster.reader_timeout (0: the default).
// The table's rows are id, user, ts and pad (Produce's messages). The
// nodes are killed when the test ends.
func Nodes(t testing.TB, n int, broker, topic, group string, readerTimeout time.Duration) []*testnode.Node {
	t.Helper()
	dir := t.TempDir()
	warehouse, catalog := filepath.Join(dir, "warehouse"), filepath.Join(dir, "catalog.db")
	nodes := make([]*testnode.Node, n)
	var members []string
	for i := range nodes {
		port, err := freeport.Port()
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = &testnode.Node{Name: fmt.Sprintf("node%d", i), URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
		members = append(members, strconv.Quote(nodes[i].URL))
	}
	reader := ""
	if readerTimeout > 0 {
		reader = ", reader_timeout: " + readerTimeout.String()
	}
	for _, nd := range nodes {
		nd.Config = filepath.Join(dir, nd.Name+".yaml")
		nd.Log = filepath.Join(dir, nd.Name+".log")
		cfg := fmt.Sprintf(`
storage: {dir: %q}
listen: {http: %q}
limits: {query_timeout: 2m}
cluster: {members: [%s], node_timeout: 5s%s}
tables:
  - name: events
    hashBy: user
    sortBy: ts
    schema:
      - {name: id, type: int64}
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: pad, type: string}
    sources:
      - kafka:
          brokers: [%s]
          topics: [%s]
          group: %s
          session_timeout: 6s
    compact:
      after: 1h
      remove: true
      iceberg:
        warehouse: %s
        catalog: {uri: %q}
        node: %s
        continuous: true
        orphan_interval: -1s
        maintain: {interval: -1s}
`, filepath.Join(dir, nd.Name), strings.TrimPrefix(nd.URL, "http://"), strings.Join(members, ", "), reader,
			broker, topic, group, warehouse, catalog, nd.Name)
		if err := os.WriteFile(nd.Config, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nd.Kill)
	}
	return nodes
}

// User is the user (the message key, the table's hashBy) of id: 30 users.
func User(id int) string { return "u" + strconv.Itoa(id%30) }

// Produce produces the ids [from, to) to topic, keyed by User, each with
// pad bytes of padding, stamped a second apart from 2026-11-26 10:00 UTC
// (older than the nodes' compact.after: a commit takes them).
func Produce(t testing.TB, cl *kgo.Client, topic string, from, to, pad int) {
	t.Helper()
	padding := strings.Repeat("x", pad)
	var recs []*kgo.Record
	for id := from; id < to; id++ {
		u := User(id)
		ts := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC).Add(time.Duration(id) * time.Second).Format(time.RFC3339)
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(u),
			Value: fmt.Appendf(nil, `{"id":%d,"user":%q,"ts":%q,"pad":%q}`, id, u, ts, padding)})
		if len(recs) == 5000 || id == to-1 {
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			recs = recs[:0]
		}
	}
}

// Make makes the overlap on nodes[0] and nodes[1] (of Nodes, not started)
// for the n messages of topic's partitions already produced: node0 stores
// them and is killed, the group's offsets are reset to the start (as a
// node killed before its offset commit leaves them), node1 stores them
// all again, and node0 restarts on its store. It returns with both nodes
// running, each holding the n rows.
func Make(t testing.TB, nodes []*testnode.Node, adm *kadm.Client, topic, group string, partitions int32, n int) {
	t.Helper()
	nodes[0].Start(t)
	WaitStored(t, nodes[0], n)
	nodes[0].Kill()
	// The dead node's offset commits are lost: the group's offsets go back
	// to the start (the broker takes the reset once the group is empty,
	// after the dead member's session timeout).
	reset := kadm.Offsets{}
	for p := range partitions {
		reset.AddOffset(topic, p, 0, -1)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := adm.CommitOffsets(context.Background(), group, reset)
		if err == nil && resp.Error() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reset the group's offsets: %v %v", err, resp.Error())
		}
		time.Sleep(500 * time.Millisecond)
	}
	nodes[1].Start(t)
	WaitStored(t, nodes[1], n)
	nodes[0].Start(t)
	WaitStored(t, nodes[0], n)
}

// WaitStored waits, at most 90 s, until nd's own query (its store and the
// table) returns want rows.
func WaitStored(t testing.TB, nd *testnode.Node, want int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		got, err := storedRows(nd.URL)
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d rows within 90s (%v): %s", nd.Name, got, want, err, nd.Tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// storedRows is how many rows node's own query returns.
func storedRows(node string) (int, error) {
	resp, err := http.Get(node + "/v1/tables/events/query?columns=id")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || resp.Trailer.Get("Sluice-Error") != "" {
		return 0, fmt.Errorf("status %d, %v, trailer %q: %.200s", resp.StatusCode, err, resp.Trailer.Get("Sluice-Error"), b)
	}
	return strings.Count(string(b), "\n"), nil
}
