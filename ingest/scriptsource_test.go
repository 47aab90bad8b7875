package ingest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/internal/colbatch"
)

// TestScriptLogSource: a script's log line about a row names the row's
// origin, its index in the batch and its input line, by column and as
// maps, in parts of two rows, with a filter dropping rows before the
// column runs (so the column's own row numbers differ from the input's).
func TestScriptLogSource(t *testing.T) {
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
	in := `{"user":"test"}
{"user":"a"}

{"user":"test"}
{"user":"b"}
{"user":"c"}
`
	wantLine := map[string]float64{"a": 2, "b": 5, "c": 6}
	wantRow := map[string]float64{"a": 1, "b": 3, "c": 4}
	for _, byColumn := range []bool{false, true} {
		t.Run(fmt.Sprint("byColumn=", byColumn), func(t *testing.T) {
			var buf bytes.Buffer
			p, err := compute.New(context.Background(), cfg, compute.Options{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			pipe := &Pipeline{Table: &refusingTable{}, Compute: p}
			b := pipe.Begin()
			defer b.Close()
			b.Origin = "file in.jsonl"
			var res Result
			opts := DecodeOptions{Format: NDJSON, BatchRows: 2}
			if byColumn {
				_, err = DecodeColumns(strings.NewReader(in), opts, func(cb *colbatch.Batch) error { return b.AddColumns(context.Background(), cb, &res) })
			} else {
				_, err = Decode(strings.NewReader(in), opts, func(rows []Row, lines []int) error { return b.Add(context.Background(), rows, lines, &res) })
			}
			if err != nil {
				t.Fatal(err)
			}
			seen := 0
			sc := bufio.NewScanner(&buf)
			for sc.Scan() {
				var l struct {
					Msg    string
					Source struct {
						Origin    string
						Row, Line float64
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
				if l.Source.Origin != "file in.jsonl" || l.Source.Line != wantLine[u] || l.Source.Row != wantRow[u] {
					t.Errorf("line about %q: source %+v, want line %v, row %v", u, l.Source, wantLine[u], wantRow[u])
				}
			}
			if seen != 3 {
				t.Fatalf("%d lines, want 3:\n%s", seen, buf.String())
			}
		})
	}
}
