package table

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// TestQueryBlocksSeqsMatchesQueryValues reads a table of many blocks (several
// appends, several partitions, nulls) block-wise, inline and on workers, and
// checks every row's values against the row-wise query's: the block-wise
// vectors (their strings point into the decoded block) must hold each
// block's own values during its emit call, whichever worker decoded it and
// however many blocks are in flight.
func TestQueryBlocksSeqsMatchesQueryValues(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	cols := []Column{{Name: "user", Type: String}, {Name: "ts", Type: Timestamp}, {Name: "n", Type: Int64},
		{Name: "f", Type: Float64}, {Name: "ok", Type: Bool}, {Name: "note", Type: String}, {Name: "doc", Type: JSON}}
	tb, err := s.Table(Config{Name: "events", HashBy: "user", SortBy: "ts", Columns: cols})
	if err != nil {
		t.Fatal(err)
	}
	for a := range 20 {
		var rows []Row
		for i := a * 100; i < (a+1)*100; i++ {
			r := Row{"user": "u" + strconv.Itoa(i%4), "ts": t0.Add(time.Duration(i) * time.Second)}
			if i%5 != 0 {
				r["n"], r["f"], r["ok"] = int64(i), float64(i)/3, i%2 == 0
				r["note"], r["doc"] = fmt.Sprintf("note %d %x", i, i*7919), `{"i":`+strconv.Itoa(i)+`}`
			}
			rows = append(rows, r)
		}
		if err := tb.Append(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
	names := []string{"user", "ts", "n", "f", "ok", "note", "doc"}
	q := Query{Columns: names, ByKey: true, From: t0.Add(150 * time.Second), To: t0.Add(1850 * time.Second)}
	var want []string
	if err := tb.QueryValues(ctx, q, func(_ []Column, vals []any) error {
		want = append(want, fmt.Sprint(vals...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(want) != 1700 {
		t.Fatalf("row-wise query gave %d rows, want 1700", len(want))
	}
	for _, workers := range []int{1, 3} {
		t.Run("workers="+strconv.Itoa(workers), func(t *testing.T) {
			var got []string
			blocks := 0
			err := tb.QueryBlocksSeqs(ctx, q, 0, 0, workers, func(cs []Column, b *BlockRows) error {
				blocks++
				for _, r := range b.Rows {
					vals := make([]any, len(b.Cols))
					for i := range b.Cols {
						vals[i] = vectorValue(&b.Cols[i], cs[i].Type, r)
					}
					got = append(got, fmt.Sprint(vals...))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if blocks < 20 {
				t.Errorf("%d blocks, want at least 20", blocks)
			}
			if len(got) != len(want) {
				t.Fatalf("%d rows, want %d", len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("row %d: got %s, want %s", i, got[i], want[i])
				}
			}
		})
	}
}

// vectorValue is row r of v as the row-wise query boxes it.
func vectorValue(v *ColumnVector, typ Type, r int32) any {
	if v.Null(r) {
		return nil
	}
	switch typ {
	case Int64:
		return v.Ints[r]
	case Float64:
		return v.Floats[r]
	case Bool:
		return v.Ints[r] != 0
	case Timestamp:
		return time.Unix(0, v.Ints[r]).UTC()
	case JSON:
		return json.RawMessage(v.Strs[r])
	}
	return v.Strs[r]
}
