package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaReplayRestoresKeyAndHeaders: a Kafka message with a key and
// headers that a computed column rejects is a dead letter of its body;
// once the script is fixed, a replay stores its row with the key and
// headers the source config derives (_key, _headers) and the computed
// column that reads the key: the row equals what the message would have
// made, had it not failed, column for column; a second replay takes
// nothing.
func TestKafkaReplayRestoresKeyAndHeaders(t *testing.T) {
	t.Parallel()
	broker(t)
	topic := uniqueName("replaykey")
	createTopic(t, topic)
	dir := t.TempDir()
	script := filepath.Join(dir, "owner.lua")
	writeScript := func(src string) {
		if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeScript(`function main(row) if row.n == 3 then error("n is 3") end return row._key .. "/" .. row.n end`)
	cfg := kafkaConfig("events", topic, "g-"+topic, "", fmt.Sprintf(`    computed:
      - {name: owner, type: string, on_error: reject, func: %q}
`, script), "          metadata: [key, headers]\n")
	cl := newProducer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for n := 1; n <= 4; n++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: []byte(fmt.Sprintf("k%d", n)),
			Value:   fmt.Appendf(nil, `{"id":%d,"user":"u","ts":%q,"n":%d}`, n, t0.Add(time.Duration(n)*time.Second).Format(time.RFC3339Nano), n),
			Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte(fmt.Sprintf("t%d", n))}, {Key: "trace", Value: []byte("x")}}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "node")
	nd := startNode(t, cfg, data)
	waitRows(t, nd, "events", 3, time.Minute)
	waitDeadLetters(t, nd, 1, time.Minute)
	nd.stop()

	// The fix: the script no longer fails; the node loads it at start.
	writeScript(`function main(row) return row._key .. "/" .. row.n end`)
	nd = startNode(t, cfg, data)
	waitRows(t, nd, "events", 3, time.Minute)
	for round := range 2 {
		resp, err := http.Post(nd.URL+"/v1/tables/events/replay", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var res struct{ Replayed, Rows, Failed, Done int }
		if err := json.Unmarshal(b, &res); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("replay %d: %s %s", round, resp.Status, b)
		}
		if want := (struct{ Replayed, Rows, Failed, Done int }{1 - round, 1 - round, 0, round}); res != want {
			t.Fatalf("replay %d: %+v, want %+v", round, res, want)
		}
	}
	rows := queryRows(t, nd, "events")
	if len(rows) != 4 {
		t.Fatalf("%d rows after the replay, want 4: %v", len(rows), rows)
	}
	for n := 1; n <= 4; n++ {
		want := map[string]any{"id": float64(n), "user": "u", "n": float64(n),
			"ts":    t0.Add(time.Duration(n) * time.Second).Format(time.RFC3339Nano),
			"_key":  fmt.Sprintf("k%d", n),
			"owner": fmt.Sprintf("k%d/%d", n, n), "_headers": map[string]any{"tenant": fmt.Sprintf("t%d", n), "trace": "x"}}
		got := rows[n]
		for k, w := range want {
			if !jsonEqual(got[k], w) {
				t.Errorf("row %d: %s = %#v, want %#v", n, k, got[k], w)
			}
		}
		for k, v := range got {
			if _, ok := want[k]; !ok && v != nil {
				t.Errorf("row %d: column %s = %#v, which a good message does not make", n, k, v)
			}
		}
	}
}
