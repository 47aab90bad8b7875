package table

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble"

	"github.com/sluicedb/sluice/coltype"
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
		{name: "d", typ: Date, vals: []value{{i: -1}, {i: 20786}, {}}, null: []bool{false, false, true}},
		{name: "t", typ: TimeOfDay, vals: []value{{i: 1}, {}, {i: 86_399_999_999}}, null: []bool{false, true, false}},
		{name: "u", typ: UUID, vals: []value{{s: "0123456789abcdef"}, {}, {}}, null: []bool{false, true, true}},
		{name: "x", typ: Bytes, vals: []value{{s: "\x00\xff"}, {s: ""}, {}}, null: []bool{false, false, true}},
		{name: "m", typ: coltype.Decimal(12, 3), vals: []value{{i: -5}, {i: 123456}, {}}, null: []bool{false, false, true}},
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

// TestBlockRoundTripRandom encodes random columns (every type, random
// nulls, random row order) and checks the decoder gives every value back.
func TestBlockRoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	types := []Type{Int64, Float64, String, Bool, Timestamp, JSON}
	for iter := range 200 {
		rows := 1 + rng.IntN(300)
		var cols []colData
		for c, typ := range types {
			cd := colData{name: fmt.Sprintf("c%d", c), typ: typ, vals: make([]value, rows), null: make([]bool, rows)}
			nullRate := []float64{0, 0.3, 1}[rng.IntN(3)]
			for r := range rows {
				if rng.Float64() < nullRate {
					cd.null[r] = true
					continue
				}
				switch typ {
				case Int64, Timestamp:
					cd.vals[r].i = rng.Int64() >> rng.IntN(64)
					if rng.IntN(2) == 0 {
						cd.vals[r].i = -cd.vals[r].i
					}
				case Float64:
					cd.vals[r] = floatValue(rng.NormFloat64() * 1e6)
				case Bool:
					cd.vals[r].i = int64(rng.IntN(2))
				case String, JSON:
					cd.vals[r].s = strings.Repeat("é", rng.IntN(20))
				}
			}
			cols = append(cols, cd)
		}
		idx := rng.Perm(rows)
		var d blockDecoder
		if err := d.decode(nil, compressBlock(nil, encodeBlock(nil, cols, idx)), func(string) bool { return true }); err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		if d.rows != rows || d.n != len(cols) {
			t.Fatalf("iteration %d: %d rows %d columns", iter, d.rows, d.n)
		}
		for c := range cols {
			got, want := &d.cols[c], &cols[c]
			for j, r := range idx {
				if got.isNull(j) != want.null[r] {
					t.Fatalf("iteration %d column %v row %d: null %v, want %v", iter, want.typ, j, got.isNull(j), want.null[r])
				}
				if want.null[r] {
					continue
				}
				ok := true
				switch want.typ {
				case Int64, Timestamp, Bool:
					ok = got.ints[j] == want.vals[r].i
				case Float64:
					ok = got.floats[j] == want.vals[r].float()
				default:
					ok = got.strs[j] == want.vals[r].s
				}
				if !ok {
					t.Fatalf("iteration %d column %v row %d: wrong value", iter, want.typ, j)
				}
			}
		}
	}
}

func TestCompressBlockKeepsTheSmaller(t *testing.T) {
	repetitive := bytes.Repeat([]byte("abcd"), 1000)
	if v := compressBlock(nil, repetitive); v[1] != codecZstd || len(v) >= len(repetitive) {
		t.Fatalf("repetitive payload: codec %d, %d bytes", v[1], len(v))
	}
	noise := make([]byte, 4000)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	if v := compressBlock([]byte("prefix"), noise); string(v[:6]) != "prefix" || v[7] != codecNone || !bytes.Equal(v[8:], noise) {
		t.Fatalf("incompressible payload not stored as is (codec %d, %d bytes)", v[7], len(v))
	}
	if v := compressBlock(nil, repetitive[:100]); v[1] != codecNone {
		t.Fatalf("small payload compressed")
	}
}
