package table

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble"
)

// FuzzDecodeBlock feeds arbitrary bytes (seeded with real blocks) to the
// block decoder: it must return a *CorruptionError or decode, never panic
// or allocate without bound.
func FuzzDecodeBlock(f *testing.F) {
	cols := []colData{
		{name: "ts", typ: Timestamp, vals: []value{{i: 5}, {i: 3}, {i: 9}}, null: []bool{false, false, false}},
		{name: "n", typ: Int64, vals: []value{{i: -1}, {}, {i: 1 << 40}}, null: []bool{false, true, false}},
		{name: "f", typ: Float64, vals: []value{floatValue(1.5), floatValue(-2), {}}, null: []bool{false, false, true}},
		{name: "s", typ: String, vals: []value{{s: "a"}, {s: ""}, {s: "héllo"}}, null: []bool{false, false, false}},
		{name: "b", typ: Bool, vals: []value{{i: 1}, {i: 0}, {i: 1}}, null: []bool{false, false, false}},
		{name: "j", typ: JSON, vals: []value{{s: `{"a":1}`}, {}, {}}, null: []bool{false, true, true}},
	}
	payload := encodeBlock(nil, cols, []int{0, 1, 2})
	f.Add(compressBlock(nil, payload))
	f.Add(append([]byte{blockVersion, codecNone}, payload...))
	f.Add([]byte{blockVersion, codecNone, 0, 0})
	f.Fuzz(func(t *testing.T, v []byte) {
		var d blockDecoder
		err := d.decode([]byte("k"), v, func(string) bool { return true })
		var ce *CorruptionError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("error %v is not a CorruptionError", err)
		}
	})
}

func TestBlockRoundTrip(t *testing.T) {
	cols := []colData{
		{name: "ts", typ: Timestamp, vals: []value{{i: 5}, {i: 3}, {i: -9}}, null: []bool{false, false, false}},
		{name: "n", typ: Int64, vals: []value{{i: -1}, {}, {i: 1 << 40}}, null: []bool{false, true, false}},
		{name: "s", typ: String, vals: []value{{s: "a"}, {s: ""}, {s: "héllo"}}, null: []bool{false, false, false}},
		{name: "b", typ: Bool, vals: []value{{i: 1}, {i: 0}, {i: 1}}, null: []bool{true, false, false}},
	}
	var d blockDecoder
	if err := d.decode(nil, compressBlock(nil, encodeBlock(nil, cols, []int{2, 0, 1})), func(n string) bool { return n != "s" }); err != nil {
		t.Fatal(err)
	}
	if d.rows != 3 || d.n != 3 {
		t.Fatalf("decoded %d rows %d columns, want 3 and 3 (s skipped)", d.rows, d.n)
	}
	ts, n, b := d.cols[0], d.cols[1], d.cols[2]
	if ts.ints[0] != -9 || ts.ints[1] != 5 || ts.ints[2] != 3 {
		t.Errorf("ts %v", ts.ints)
	}
	if n.ints[0] != 1<<40 || n.ints[1] != -1 || !n.isNull(2) || n.isNull(0) {
		t.Errorf("n %v %v", n.ints, n.present)
	}
	if b.ints[0] != 1 || b.ints[1] != 1 || !b.isNull(1) || b.isNull(2) {
		// row order 2,0,1: b values 1 (row 2), null (row 0), 0 (row 1)
		if !(b.ints[0] == 1 && b.isNull(1) && b.ints[2] == 0) {
			t.Errorf("b %v %v", b.ints, b.present)
		}
	}
}

// TestQueryReportsCorruptBlock overwrites a stored block with damaged bytes:
// the query fails with a CorruptionError naming the block's key.
func TestQueryReportsCorruptBlock(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "x", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Append(context.Background(), []Row{{"ts": t0, "a": int64(300)}, {"ts": t0, "a": int64(7)}}); err != nil {
		t.Fatal(err)
	}
	lo, hi := tableBounds(tb.id)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		t.Fatal(err)
	}
	if !it.First() {
		t.Fatal("no block stored")
	}
	key := slices.Clone(it.Key())
	val := slices.Clone(it.Value())
	it.Close()
	if val[1] != codecNone { // two rows are under minCompress
		t.Fatalf("codec %d", val[1])
	}
	val = val[:len(val)-1] // truncate the last column's values
	if err := s.db.Set(key, val, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	err = tb.Query(context.Background(), Query{}, func(Row) error { return nil })
	var ce *CorruptionError
	if !errors.As(err, &ce) || !bytes.Equal(ce.Key, key) {
		t.Fatalf("query of a damaged block: %v, want a CorruptionError for key %x", err, key)
	}
}
