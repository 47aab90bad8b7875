package stream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/table"
)

// TestScriptLogNamesMessage: a script's log line about a row names the
// message the row came from (topic, partition, offset), by column and as
// maps, with a filter dropping rows before the column runs and a message
// of two rows.
func TestScriptLogNamesMessage(t *testing.T) {
	cfg, err := compute.ParseConfig([]byte(`
filters:
  - {name: not_test, func: "function main(row) return row.user ~= 'test' end"}
computed:
  - name: u
    type: string
    log_rate: -1
    func: |
      local log = require("log")
      function main(row)
        log.info("seen", {user = row.user})
        return row.user
      end
`))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bodies := []string{`{"user":"test"}`, `{"user":"a"}`, "{\"user\":\"test\"}\n{\"user\":\"b\"}", `{"user":"c"}`}
	wantOffset := map[string]float64{"a": 101, "b": 102, "c": 103}
	for _, mapsOnly := range []bool{true, false} {
		t.Run(fmt.Sprint("mapsOnly=", mapsOnly), func(t *testing.T) {
			ctx := context.Background()
			s, err := table.Open(t.TempDir(), table.Options{Now: func() time.Time { return at }})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			tb, err := s.Table(table.Config{Name: "events"})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			p, err := compute.New(ctx, cfg, compute.Options{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			w, err := newWriter(Target{Store: s, Table: tb, Compute: p}, "ndjson", nil, kafkaFields, func(m *Message) string { return fmt.Sprintf("o%s/%d", m.Topic, m.Offset) })
			if err != nil {
				t.Fatal(err)
			}
			w.mapsOnly = mapsOnly
			w.now = func() time.Time { return at }
			var msgs []Message
			for i, b := range bodies {
				msgs = append(msgs, Message{Body: []byte(b), Topic: "events", Partition: 3, Offset: int64(100 + i), Time: at})
			}
			if err := w.WriteBounded(ctx, msgs, func(*Message) []Position { return []Position{{Name: "p", Value: []byte{1}}} }, func(*Message, Result) {}); err != nil {
				t.Fatal(err)
			}
			seen := 0
			sc := bufio.NewScanner(&buf)
			for sc.Scan() {
				var l struct {
					Msg    string
					Source struct {
						Topic             string
						Partition, Offset float64
					}
					Fields struct{ User string }
				}
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					t.Fatal(err)
				}
				if l.Msg != "seen" {
					continue
				}
				seen++
				u := l.Fields.User
				if l.Source.Topic != "events" || l.Source.Partition != 3 || l.Source.Offset != wantOffset[u] {
					t.Errorf("line about %q: source %+v, want offset %v", u, l.Source, wantOffset[u])
				}
			}
			if seen != 3 {
				t.Fatalf("%d lines, want 3:\n%s", seen, buf.String())
			}
		})
	}
}
