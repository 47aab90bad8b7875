package ingest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/internal/colbatch"
)

// refusingTable keeps the rows of its committed batches, as maps, and
// refuses a part holding a row whose "refuse" field is true (rowRefused
// names the row, as the table's SchemaError does).
type refusingTable struct{ rows []Row }

type rowRefused struct{ row int }

func (e rowRefused) Error() string { return fmt.Sprintf("row %d refused", e.row) }

func (t *refusingTable) Append(ctx context.Context, rows []Row) error {
	tb, _ := t.NewBatch()
	if err := tb.Add(ctx, rows); err != nil {
		return err
	}
	return tb.Commit(ctx)
}

func (t *refusingTable) NewBatch() (AppendBatch, error) { return &refusingBatch{t: t}, nil }

type refusingBatch struct {
	t    *refusingTable
	rows []Row
}

func (b *refusingBatch) Add(_ context.Context, rows []Row) error {
	for i, r := range rows {
		if r["refuse"] == true {
			return rowRefused{i}
		}
	}
	b.rows = append(b.rows, rows...)
	return nil
}

func (b *refusingBatch) AddColumns(ctx context.Context, cb *colbatch.Batch) error {
	return b.Add(ctx, cb.Rows())
}

func (b *refusingBatch) Commit(context.Context) error {
	b.t.rows = append(b.t.rows, b.rows...)
	return nil
}
func (b *refusingBatch) Close() {}

// TestPipelineColumnsMatchMaps: a batch with computed columns and filters
// decoded by column (DecodeColumns, Batch.AddColumns: compute's
// ProcessColumns) ends as the same batch decoded into maps (Decode,
// Batch.Add): the rows stored, the result (filtered, failed, column
// errors, dead letters with their lines), the counters, and the error
// naming the input row and line of a row the table refuses or a function
// rejects.
func TestPipelineColumnsMatchMaps(t *testing.T) {
	cfg, err := compute.ParseConfig([]byte(`
filters:
  - {name: not_test, func: "function main(row) return row.user ~= 'test' end"}
computed:
  - name: n2
    type: int64
    on_error: deadletter
    func: "function main(row) if row.n == 13 then error('unlucky') end row.seen = true; row.drop = nil; return (row.n or 0) * 2 end"
  - name: strict
    type: string
    on_error: reject
    func: "function main(row) if row.n == 99 then error('ninety-nine') end return row.user end"
    nullable: true
`))
	if err != nil {
		t.Fatal(err)
	}
	clean := `{"user":"a","n":1,"drop":"x"}
{"user":"test","n":2}

{"user":"b","n":13,"f":1.5}
{bad line
{"user":"c","n":3,"nested":{"k":[1,null]}}
{"user":"test"}
{"user":"d","n":13}
{"n":4}
`
	for _, tc := range []struct {
		name, in string
		policy   Policy
		parts    int // BatchRows
	}{
		{"clean", clean, Skip, 0},
		{"small parts", clean, Skip, 2},
		{"refused", clean + `{"user":"e","n":5,"refuse":true}` + "\n", Skip, 0},
		{"rejected", clean + `{"user":"f","n":99}` + "\n", Skip, 0},
		{"refused in a later part", clean + `{"user":"e","n":5,"refuse":true}` + "\n", Skip, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(byColumn bool) (stored []Row, res Result, counters [6]int64, err error) {
				p, perr := compute.New(context.Background(), cfg, compute.Options{})
				if perr != nil {
					t.Fatal(perr)
				}
				defer p.Close()
				tb := &refusingTable{}
				pipe := &Pipeline{Table: tb, Compute: p, RowOf: func(err error) (int, bool) {
					var rr rowRefused
					if errors.As(err, &rr) {
						return rr.row, true
					}
					return 0, false
				}}
				if !pipe.Columnar() {
					t.Fatalf("Columnar() = %v", pipe.Columnar())
				}
				b := pipe.Begin()
				defer b.Close()
				opts := DecodeOptions{Format: NDJSON, Policy: tc.policy, BatchRows: tc.parts}
				var d Decoded
				if byColumn {
					d, err = DecodeColumns(strings.NewReader(tc.in), opts, func(cb *colbatch.Batch) error { return b.AddColumns(context.Background(), cb, &res) })
				} else {
					d, err = Decode(strings.NewReader(tc.in), opts, func(rows []Row, lines []int) error { return b.Add(context.Background(), rows, lines, &res) })
				}
				if err == nil {
					err = b.Commit(context.Background(), &res)
				}
				res.AddBadLines(d)
				c := pipe.Counters()
				return tb.rows, res, [6]int64{c.Rows.Load(), c.Accepted.Load(), c.Filtered.Load(), c.Failed.Load(), c.Batches.Load(), c.RejectedBatches.Load()}, err
			}
			wantRows, wantRes, wantCounters, wantErr := run(false)
			gotRows, gotRes, gotCounters, gotErr := run(true)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Errorf("error by column: %v\nas maps: %v", gotErr, wantErr)
			}
			var gre, wre *RowError
			if errors.As(wantErr, &wre) && (!errors.As(gotErr, &gre) || gre.Row != wre.Row || gre.Line != wre.Line) {
				t.Errorf("row error by column %+v, as maps %+v", *gre, *wre)
			}
			if g, w := fmt.Sprint(gotRows), fmt.Sprint(wantRows); g != w {
				t.Errorf("stored by column:\n%s\nas maps:\n%s", g, w)
			}
			if !reflect.DeepEqual(gotRes, wantRes) {
				t.Errorf("result by column:\n%+v\nas maps:\n%+v", gotRes, wantRes)
			}
			if gotCounters != wantCounters {
				t.Errorf("counters by column %v, as maps %v", gotCounters, wantCounters)
			}
			if tc.name == "clean" && (len(wantRows) != 3 || len(wantRes.DeadLetters) != 2 || wantRes.DeadLetters[1].Line != 8) {
				t.Errorf("the clean batch stored %d rows and %d dead letters (%+v): want 3 and 2, the second of line 8", len(wantRows), len(wantRes.DeadLetters), wantRes.DeadLetters)
			}
		})
	}
}
