package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/table"
)

func TestParseWhere(t *testing.T) {
	f := func(in string, want WhereClause) {
		t.Helper()
		got, err := parseWhere(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if got.Column != want.Column || got.Op != want.Op || got.Value != want.Value || len(got.Values) != len(want.Values) {
			t.Fatalf("%q = %+v, want %+v", in, got, want)
		}
		for i := range want.Values {
			if got.Values[i] != want.Values[i] {
				t.Fatalf("%q values = %v, want %v", in, got.Values, want.Values)
			}
		}
	}
	f("n>=5", WhereClause{Column: "n", Op: ">=", Value: "5"})
	f("n <= 5", WhereClause{Column: "n", Op: "<=", Value: "5"})
	f("user != bob", WhereClause{Column: "user", Op: "!=", Value: "bob"})
	f("user<>bob", WhereClause{Column: "user", Op: "<>", Value: "bob"})
	f("note = a=b", WhereClause{Column: "note", Op: "=", Value: "a=b"})
	f("user IN (ann, bob)", WhereClause{Column: "user", Op: "IN", Values: []any{"ann", "bob"}})
	f("user in ann,bob", WhereClause{Column: "user", Op: "IN", Values: []any{"ann", "bob"}})
	f("note IS NULL", WhereClause{Column: "note", Op: "IS NULL"})
	f("note is not null", WhereClause{Column: "note", Op: "IS NOT NULL"})
	for _, bad := range []string{"", "n", "=5", "IS NULL"} {
		if _, err := parseWhere(bad); !errors.Is(err, errBadQuery) {
			t.Errorf("%q: %v, want errBadQuery", bad, err)
		}
	}
}

// FuzzParseWhere: any input parses or fails with errBadQuery, and a parse
// names a column and an operator.
func FuzzParseWhere(f *testing.F) {
	for _, s := range []string{"n>=5", "user IN (a,b)", "x IS NOT NULL", "a=b=c", " IN ", "<>",
		`address.city = "Oslo"`, `attrs."a=b" != 1`, `"a.b"[0] IN (x)`, `."`, `["=`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := parseWhere(s)
		if err != nil {
			if !errors.Is(err, errBadQuery) {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if w.Column == "" || w.Op == "" {
			t.Fatalf("%q parsed to %+v", s, w)
		}
	})
}

// TestQueryAnswerSameOnWorkers: an NDJSON answer from the hot store, whose
// rows are encoded on the scan's workers (table.QueryEncoded), is byte for
// byte the rows of QueryValues encoded one by one in order, at one P and
// at eight, over many partitions and blocks, with a range, predicates,
// keys and limits; the row count returned is the rows written.
func TestQueryAnswerSameOnWorkers(t *testing.T) {
	s := startServer(t, `
tables:
  - name: events
    hashBy: user
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
      - {name: score, type: float64}
      - {name: ok, type: bool}
      - {name: doc, type: json}
`, "")
	ctx := context.Background()
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for b := range 40 {
		var body bytes.Buffer
		for i := range 250 {
			k := b*250 + i
			fmt.Fprintf(&body, `{"user":"u%d","ts":"%s","n":%d,"score":%g,"ok":%t,"doc":{"k":%d}}`+"\n",
				k%23, base.Add(time.Duration(k)*time.Second).Format(time.RFC3339), k, float64(k)/3, k%2 == 0, k%7)
			if k%11 == 0 {
				fmt.Fprintf(&body, `{"user":null,"ts":"%s","n":null}`+"\n", base.Add(time.Duration(k)*time.Second).Format(time.RFC3339))
			}
		}
		if _, err := s.Ingest(ctx, "events", &body, IngestOptions{Format: ingest.NDJSON}); err != nil {
			t.Fatal(err)
		}
	}
	tb := s.tables["events"].table
	for name, req := range map[string]QueryRequest{
		"all":   {},
		"range": {From: "2024-05-01T00:10:00Z", To: "2024-05-01T02:00:00Z", Where: []WhereClause{{Column: "n", Op: ">", Value: "100"}}},
		"keys":  {Hash: []any{"u3", "u7", "u19"}, Columns: []string{"n", "ts", "doc"}},
		"limit": {Limit: 777},
		"one":   {Limit: 1, From: "2024-05-01T01:00:00Z"},
	} {
		q, err := req.tableQuery(tb)
		if err != nil {
			t.Fatal(err)
		}
		var want []byte
		wantRows := 0
		var enc *rowEncoder
		err = tb.QueryValues(ctx, q, func(cols []table.Column, vals []any) error {
			if enc == nil {
				names := make([]string, len(cols))
				for i, c := range cols {
					names[i] = c.Name
				}
				enc = newRowEncoder(names)
			}
			var err error
			want, err = enc.appendValues(want, vals)
			want = append(want, '\n')
			wantRows++
			return err
		})
		if err != nil || wantRows == 0 {
			t.Fatalf("%s: %d rows, %v", name, wantRows, err)
		}
		for _, procs := range []int{1, 8} {
			prev := runtime.GOMAXPROCS(procs)
			var got bytes.Buffer
			n, err := s.Query(ctx, "events", req, &got, "", nil)
			runtime.GOMAXPROCS(prev)
			if err != nil || n != wantRows || !bytes.Equal(got.Bytes(), want) {
				t.Errorf("%s, %d Ps: %d rows, %d bytes, %v; want %d rows, %d bytes", name, procs, n, got.Len(), err, wantRows, len(want))
			}
		}
	}
}

// BenchmarkQueryAnswer is the server's NDJSON answer of a range over 64
// partitions (400k ten-field rows in ~6,400 blocks) written to io.Discard:
// the decoding and the encoding on the scan's workers, the writes on the
// caller's goroutine, without HTTP. Run it with -cpu 1,2,4,8,16 on a
// machine with that many cores: rows/s should grow with them and the rows
// per CPU-second stay flat.
func BenchmarkQueryAnswer(b *testing.B) {
	cfg, err := config.Parse([]byte(benchConfig), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(context.Background(), cfg, Options{StorageDir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	const batches, batchRows, partitions = 100, 4000, 64
	for n := range batches {
		var buf bytes.Buffer
		for i := range batchRows {
			k := n*batchRows + i
			fmt.Fprintf(&buf, `{"time":"%s","user":"u%d","action":"view","country":"SG","device":"web","amount":%d.5,"score":%d.5,"count":%d,"session":%d,"ok":true}`+"\n",
				base.Add(time.Duration(k)*37*time.Millisecond).Format(time.RFC3339Nano), k%partitions, k%500, k%97, k%13, k/7)
		}
		if _, err := s.Ingest(ctx, "bench", &buf, IngestOptions{Format: ingest.NDJSON}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	rows := 0
	for b.Loop() {
		n, err := s.Query(ctx, "bench", QueryRequest{}, io.Discard, "", nil)
		if err != nil || n != batches*batchRows {
			b.Fatalf("%d rows, %v", n, err)
		}
		rows += n
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(rows)/(processCPU()-cpu0).Seconds(), "rows/CPU-s")
}
