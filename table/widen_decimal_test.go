package table

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/avro"

	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/ingest/schemaformat"
	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/internal/testregistry"
)

// decimalTexts is column col of q's rows as text (a decimal's exact text,
// "null" for none), in time order.
func decimalTexts(t *testing.T, tb *Table, col string, q Query) []string {
	t.Helper()
	var out []string
	for _, r := range queryAll(t, tb, q) {
		switch v := r[col].(type) {
		case nil:
			out = append(out, "null")
		case coltype.DecimalValue:
			out = append(out, v.String())
		default:
			t.Fatalf("column %s read back as %T %v, want a decimal", col, v, v)
		}
	}
	return out
}

func mustDecimal(t *testing.T, s string, precision, scale int) coltype.DecimalValue {
	t.Helper()
	d, err := coltype.ParseDecimal(s, precision, scale)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDecimalWidensFixed: in a table whose types are fixed (a cold tier's),
// an inferred decimal(18,s) column widens to decimal(38,s) when a value of
// its scale needs more digits (a decimal, an integer, a JSON number's
// text), and when a registry's schema declares more digits at that scale,
// however small the value; by Add and AddColumns alike, within one batch
// too. Its scale never changes: a value of fewer fraction digits is stored
// exactly (1.5 as 1.50), one of more that are not zeros is a dead letter,
// as is a value of over 38 digits. The rows stored before read back
// unchanged, after a reopen too, and a where clause compares both kinds
// of block.
func TestDecimalWidensFixed(t *testing.T) {
	ctx := context.Background()
	for _, byCols := range []bool{false, true} {
		t.Run(fmt.Sprintf("byColumns=%v", byCols), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := openStore(t, dir)
			tb, err := s.Table(Config{Name: "w", SortBy: "ts"})
			if err != nil {
				t.Fatal(err)
			}
			tb.SetFixedTypes(true)
			add := func(rows ...Row) error {
				t.Helper()
				b, err := tb.NewAppender()
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				if byCols {
					err = b.AddColumns(ctx, byColumns(rows))
				} else {
					err = b.Add(ctx, rows)
				}
				if cerr := b.Commit(ctx); err == nil {
					err = cerr
				}
				return err
			}
			typeOf := func(name string) Type {
				for _, c := range tb.Schema() {
					if c.Name == name {
						return c.Type
					}
				}
				return 0
			}
			at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }

			// m: a registry's decimal(10,2) first, so decimal(18,2).
			if err := add(Row{"ts": at(0), "m": coltype.DecimalValue{Unscaled: -1250, Scale: 2, Precision: 10}}); err != nil {
				t.Fatal(err)
			}
			if typ := typeOf("m"); typ != coltype.Decimal(18, 2) {
				t.Fatalf("m is %v, want decimal(18,2)", typ)
			}
			// Fits: no widening (a decimal(10,2) of the same schema, 1.5
			// at a smaller scale, 18 digits).
			if err := add(Row{"ts": at(1), "m": coltype.DecimalValue{Unscaled: 7, Scale: 2, Precision: 10}},
				Row{"ts": at(2), "m": 1.5},
				Row{"ts": at(3), "m": mustDecimal(t, "9999999999999999.99", 18, 2)}); err != nil {
				t.Fatal(err)
			}
			if typ := typeOf("m"); typ != coltype.Decimal(18, 2) {
				t.Fatalf("m is %v after values that fit, want decimal(18,2)", typ)
			}

			// One batch: a value that needs 30 digits widens m; 1.234
			// would lose a digit at scale 2 and 41 digits fit no decimal:
			// dead letters; the rest are stored.
			wide := mustDecimal(t, "-1234567890123456789012345678.91", 30, 2)
			rows := []Row{
				{"ts": at(4), "m": wide},
				{"ts": at(5), "m": 1.234},
				{"ts": at(6), "m": json.Number("123456789012345678901234567890123456.78")},
				{"ts": at(7), "m": json.Number("12345678901234567890123456789012345678901")},
				{"ts": at(8), "m": int64(1) << 62},
				{"ts": at(9), "m": "1.230"},
			}
			err = add(rows...)
			var me *TypeMismatchError
			if !errors.As(err, &me) {
				t.Fatalf("err = %v, want a *TypeMismatchError for rows 1 and 3", err)
			}
			if want := []int{1, 3}; !reflect.DeepEqual(me.Rows, want) {
				t.Fatalf("rows left out %v, want %v (%q)", me.Rows, want, me.Reasons)
			}
			if !strings.Contains(me.RowReason(0), `column "m" (decimal(38,2))`) {
				t.Errorf("reason %q: want it to name the widened column", me.RowReason(0))
			}
			b, err := tb.NewAppender()
			if err != nil {
				t.Fatal(err)
			}
			kept := []Row{rows[0], rows[2], rows[4], rows[5]}
			if byCols {
				err = b.AddColumns(ctx, byColumns(kept))
			} else {
				err = b.Add(ctx, kept)
			}
			if err == nil {
				err = b.Commit(ctx)
			}
			b.Close()
			if err != nil {
				t.Fatal(err)
			}
			if typ := typeOf("m"); typ != coltype.Decimal(38, 2) {
				t.Fatalf("m is %v, want it widened to decimal(38,2)", typ)
			}

			// A registry's new schema version: decimal(30,2) widens n at
			// its first value, however small; decimal(30,3) (another
			// scale) does not widen o, and its 1.230 is stored as 1.23.
			if err := add(Row{"ts": at(10), "n": coltype.DecimalValue{Unscaled: 5, Scale: 2, Precision: 10}, "o": coltype.DecimalValue{Unscaled: 5, Scale: 2, Precision: 10}}); err != nil {
				t.Fatal(err)
			}
			if err := add(Row{"ts": at(11), "n": coltype.DecimalValue{Unscaled: 6, Scale: 2, Precision: 30}, "o": coltype.DecimalValue{Unscaled: 1230, Scale: 3, Precision: 30}}); err != nil {
				t.Fatal(err)
			}
			if n, o := typeOf("n"), typeOf("o"); n != coltype.Decimal(38, 2) || o != coltype.Decimal(18, 2) {
				t.Errorf("n is %v (want decimal(38,2)), o is %v (want decimal(18,2))", n, o)
			}
			// A new column widened within the batch that creates it.
			if err := add(Row{"ts": at(12), "p": coltype.DecimalValue{Unscaled: 1, Scale: 1}},
				Row{"ts": at(13), "p": mustDecimal(t, "12345678901234567890.1", 21, 1)}); err != nil {
				t.Fatal(err)
			}
			if typ := typeOf("p"); typ != coltype.Decimal(38, 1) {
				t.Errorf("p is %v, want decimal(38,1)", typ)
			}

			wantM := []string{"-12.50", "0.07", "1.50", "9999999999999999.99", wide.String(),
				"123456789012345678901234567890123456.78", "4611686018427387904.00", "1.23",
				"null", "null", "null", "null"}
			check := func() {
				t.Helper()
				if got := decimalTexts(t, tb, "m", Query{}); !reflect.DeepEqual(got, wantM) {
					t.Errorf("m read back %q, want %q", got, wantM)
				}
				if got := decimalTexts(t, tb, "m", Query{Where: []Predicate{{Column: "m", Op: Lt, Value: "1.5"}}}); !reflect.DeepEqual(got, []string{"-12.50", "0.07", wide.String(), "1.23"}) {
					t.Errorf("where m < 1.5: %q", got)
				}
				if got := decimalTexts(t, tb, "n", Query{Where: []Predicate{{Column: "n", Op: Gt, Value: "0"}}}); !reflect.DeepEqual(got, []string{"0.05", "0.06"}) {
					t.Errorf("where n > 0: %q", got)
				}
				if got := decimalTexts(t, tb, "p", Query{Where: []Predicate{{Column: "p", Op: Ge, Value: "0"}}}); !reflect.DeepEqual(got, []string{"0.1", "12345678901234567890.1"}) {
					t.Errorf("where p >= 0: %q", got)
				}
			}
			check()

			// The widened schema is persisted with the batch that widened it.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, dir)
			defer s.Close()
			if tb, err = s.Table(Config{Name: "w", SortBy: "ts"}); err != nil {
				t.Fatal(err)
			}
			tb.SetFixedTypes(true)
			if typ := typeOf("m"); typ != coltype.Decimal(38, 2) {
				t.Fatalf("m is %v after a reopen, want decimal(38,2)", typ)
			}
			check()
		})
	}
}

// TestDecimalDeclaredKeepsPrecision: a static schema's decimal(10,2) is the
// user's: a value of more digits is refused (a dead letter under fixed
// types), and a registry's wider declared precision with a value that fits
// is stored without changing the column.
func TestDecimalDeclaredKeepsPrecision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "d", SortBy: "ts", Columns: []Column{{"ts", Timestamp}, {"m", coltype.Decimal(10, 2)}}})
	if err != nil {
		t.Fatal(err)
	}
	tb.SetFixedTypes(true)
	if err := tb.Append(ctx, []Row{{"ts": t0, "m": coltype.DecimalValue{Unscaled: 5, Scale: 2, Precision: 30}}}); err != nil {
		t.Fatal(err)
	}
	var se *SchemaError
	if err := tb.Append(ctx, []Row{{"ts": t0.Add(time.Second), "m": mustDecimal(t, "123456789012.34", 14, 2)}}); !errors.As(err, &se) || se.Column != "m" {
		t.Errorf("a 14-digit value into a declared decimal(10,2): err = %v, want a SchemaError naming m", err)
	}
	if typ := tb.Schema()[1].Type; typ != coltype.Decimal(10, 2) {
		t.Errorf("m is %v, want the declared decimal(10,2)", typ)
	}
	if got := decimalTexts(t, tb, "m", Query{}); !reflect.DeepEqual(got, []string{"0.05"}) {
		t.Errorf("m read back %q, want [0.05]", got)
	}
}

// TestDecimalWidensWithRegistrySchema: a registry subject's Avro
// decimal(10,2) field, then its next version's decimal(30,2), decoded by
// the registry decoder as a source decodes them (by column, and by map on
// the rare path) into a table whose types are fixed: the column is
// decimal(18,2) after the first version's messages and decimal(38,2) from
// the second version's first message (a small value), and no message is a
// dead letter, the wide values included.
func TestDecimalWidensWithRegistrySchema(t *testing.T) {
	for _, byCols := range []bool{false, true} {
		t.Run(fmt.Sprintf("byColumns=%v", byCols), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const v1 = `{"type":"record","name":"Pay","fields":[{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}}]}`
			const v2 = `{"type":"record","name":"Pay","fields":[{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":30,"scale":2}}]}`
			reg, err := testregistry.Start(testregistry.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer reg.Close()
			id1 := reg.Register("pay-value", testregistry.Schema{Schema: v1})
			id2 := reg.Register("pay-value", testregistry.Schema{Schema: v2})
			dec, err := schemaformat.New(schemaformat.FormatAvro, schemaformat.Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			message := func(id int, schema, amount string) []byte {
				t.Helper()
				r, ok := new(big.Rat).SetString(amount)
				if !ok {
					t.Fatalf("amount %q", amount)
				}
				body, err := avro.MustParse(schema).Encode(map[string]any{"amount": r})
				if err != nil {
					t.Fatal(err)
				}
				return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), body...)
			}
			s := openStore(t, t.TempDir())
			defer s.Close()
			tb, err := s.Table(Config{Name: "pay", SortBy: "ts"})
			if err != nil {
				t.Fatal(err)
			}
			tb.SetFixedTypes(true)
			n := 0
			store := func(msgs ...[]byte) {
				t.Helper()
				b, err := tb.NewAppender()
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				if byCols {
					var cb colbatch.Batch
					rows := dec.Rows(&cb)
					for _, m := range msgs {
						if err := rows.Append(ctx, m, n+1); err != nil {
							t.Fatal(err)
						}
						cb.Set(cb.ColumnOf("ts"), cb.Len-1, t0.Add(time.Duration(n)*time.Second))
						n++
					}
					err = b.AddColumns(ctx, &cb)
				} else {
					var rows []Row
					for _, m := range msgs {
						row, err := dec.Decode(ctx, m)
						if err != nil {
							t.Fatal(err)
						}
						row["ts"] = t0.Add(time.Duration(n) * time.Second)
						n++
						rows = append(rows, row)
					}
					err = b.Add(ctx, rows)
				}
				if err == nil {
					err = b.Commit(ctx)
				}
				if err != nil {
					t.Fatalf("store: %v (a dead letter)", err)
				}
			}
			store(message(id1, v1, "-12.50"), message(id1, v1, "99999999.99"))
			if typ := tb.Schema()[1].Type; typ != coltype.Decimal(18, 2) {
				t.Fatalf("amount is %v after version 1, want decimal(18,2)", typ)
			}
			store(message(id2, v2, "0.05"))
			if typ := tb.Schema()[1].Type; typ != coltype.Decimal(38, 2) {
				t.Fatalf("amount is %v after version 2's first message, want decimal(38,2)", typ)
			}
			store(message(id2, v2, "-1234567890123456789012345678.91"), message(id1, v1, "1.25"))
			want := []string{"-12.50", "99999999.99", "0.05", "-1234567890123456789012345678.91", "1.25"}
			if got := decimalTexts(t, tb, "amount", Query{}); !reflect.DeepEqual(got, want) {
				t.Errorf("amount read back %q, want %q", got, want)
			}
		})
	}
}
