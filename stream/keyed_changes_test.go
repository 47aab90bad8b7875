package stream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDebeziumKeyedTableState: a Debezium JSON change stream into a table
// with a primary key holds each key's latest state, key for key. 120 keys
// go through creates, updates, deletes (half without their old row, so
// that the message key names the key; half with Debezium's tombstone
// after them) and re-creates, spread over four partitions by their scalar
// keys (the table's one key column fills them: no key_column is set); the
// node is killed with SIGKILL halfway and restarted on its store, so the
// messages after the group's last committed offset are delivered again and
// must change nothing. The table must hold exactly the live keys, each once
// with its last value, and no deleted key.
func TestDebeziumKeyedTableState(t *testing.T) {
	broker(t)
	topic := uniqueName("keyed")
	createTopic(t, topic)
	cfg := fmt.Sprintf(`tables:
  - name: events
    primary_key: [id]
    sources:
      - kafka:
          brokers: [%s]
          topics: [%s]
          group: g-%s
          session_timeout: 6s
          changes: {format: debezium}
`, kafkaAddr, topic, topic)
	data := filepath.Join(t.TempDir(), "node")
	nd := startNode(t, cfg, data)
	prod := newProducer(t)

	const keys, events = 120, 1500
	rng := rand.New(rand.NewPCG(7, 11))
	live := map[int]string{} // the state the source ends in
	var recs []*kgo.Record
	for e := range events {
		id := rng.IntN(keys)
		key := []byte(fmt.Sprint(id))
		old, exists := live[id]
		switch {
		case exists && rng.IntN(4) == 0:
			before := fmt.Sprintf(`{"id":%d,"name":%q}`, id, old)
			if rng.IntN(2) == 0 {
				before = "null" // no old row in the event: the message key names it
			}
			recs = append(recs, &kgo.Record{Topic: topic, Key: key,
				Value: fmt.Appendf(nil, `{"before":%s,"after":null,"op":"d","source":{"ts_ms":%d}}`, before, e)})
			if rng.IntN(2) == 0 {
				recs = append(recs, &kgo.Record{Topic: topic, Key: key}) // the tombstone
			}
			delete(live, id)
		case exists:
			name := fmt.Sprintf("v%d", e)
			recs = append(recs, &kgo.Record{Topic: topic, Key: key,
				Value: fmt.Appendf(nil, `{"before":{"id":%d,"name":%q},"after":{"id":%d,"name":%q},"op":"u","source":{"ts_ms":%d}}`, id, old, id, name, e)})
			live[id] = name
		default:
			name := fmt.Sprintf("v%d", e)
			recs = append(recs, &kgo.Record{Topic: topic, Key: key,
				Value: fmt.Appendf(nil, `{"before":null,"after":{"id":%d,"name":%q},"op":"c","source":{"ts_ms":%d}}`, id, name, e)})
			live[id] = name
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	half := len(recs) / 2
	if err := prod.ProduceSync(ctx, recs[:half]...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Some of the first half stored, its offsets perhaps not committed:
	// the restart is delivered them again.
	waitKeyedRows(t, nd, func(n int) bool { return n > 0 }, time.Minute)
	nd.Kill()
	nd = startNode(t, cfg, data)
	if err := prod.ProduceSync(ctx, recs[half:]...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var rows []map[string]any
	deadline := time.Now().Add(2 * time.Minute)
	for {
		rows = keyedRows(t, nd)
		if sameState(rows, live) || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	seen := map[int]int{}
	for _, r := range rows {
		id := int(r["id"].(float64))
		seen[id]++
		if seen[id] == 2 {
			t.Errorf("key %d held twice", id)
		}
		want, ok := live[id]
		switch {
		case !ok:
			t.Errorf("key %d was deleted at the source, the table holds %v", id, r)
		case r["name"] != want:
			t.Errorf("key %d: name %v, want %q (its last change)", id, r["name"], want)
		}
	}
	for id := range live {
		if seen[id] == 0 {
			t.Errorf("key %d is live at the source, not in the table", id)
		}
	}
	if t.Failed() {
		t.Logf("%d rows, %d live keys; node log: %s", len(rows), len(live), nd.Tail())
	}
}

// sameState reports whether rows are exactly the live keys with their
// values.
func sameState(rows []map[string]any, live map[int]string) bool {
	if len(rows) != len(live) {
		return false
	}
	for _, r := range rows {
		id, _ := r["id"].(float64)
		if want, ok := live[int(id)]; !ok || r["name"] != want {
			return false
		}
	}
	return true
}

// keyedRows is every row of the node's events table (id and name), none
// before the table has columns.
func keyedRows(t *testing.T, nd *node) []map[string]any {
	t.Helper()
	resp, err := http.Get(nd.URL + "/v1/tables/events/query?format=ndjson&columns=id,name")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusBadRequest {
		return nil // no row stored yet: the columns are unknown
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("query: %s", resp.Status)
	}
	var rows []map[string]any
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

// waitKeyedRows waits until the events table's row count satisfies ok.
func waitKeyedRows(t *testing.T, nd *node, ok func(int) bool, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok(len(keyedRows(t, nd))) {
		if time.Now().After(deadline) {
			t.Fatalf("events: no rows after %v: %s", timeout, nd.Tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
