package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/compute"
)

func decodeAll(t *testing.T, in string, opts DecodeOptions) ([]Row, Decoded, error) {
	t.Helper()
	var rows []Row
	d, err := Decode(strings.NewReader(in), opts, func(b []Row, _ []int) error { rows = append(rows, b...); return nil })
	return rows, d, err
}

func TestNDJSONBadLinesByNumber(t *testing.T) {
	in := "{\"a\":1}\n\n{\"a\":2\n{\"a\":9007199254740993}\n[1]\n"
	_, _, err := decodeAll(t, in, DecodeOptions{Format: NDJSON})
	var le *LineError
	if !errors.Is(err, ErrBadInput) || !errors.As(err, &le) || le.Line != 3 {
		t.Fatalf("reject: err = %v, want line 3", err)
	}
	rows, d, err := decodeAll(t, in, DecodeOptions{Format: NDJSON, Policy: Skip})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || d.BadCount != 2 || d.BadLines[0].Line != 3 || d.BadLines[1].Line != 5 {
		t.Fatalf("skip: rows %v bad %+v", rows, d.BadLines)
	}
	if rows[1]["a"] != int64(9007199254740993) {
		t.Fatalf("big integer rounded: %#v", rows[1]["a"])
	}
}

func TestJSONArrayLines(t *testing.T) {
	in := "[\n {\"a\": 1},\n 7,\n {\"a\": 3}\n]"
	rows, d, err := decodeAll(t, in, DecodeOptions{Format: JSONArray, Policy: Skip})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || d.BadCount != 1 || d.BadLines[0].Line != 3 {
		t.Fatalf("rows %v bad %+v", rows, d.BadLines)
	}
	_, _, err = decodeAll(t, "[\n{\"a\":1},\n{\"a\":}\n]", DecodeOptions{Format: JSONArray, Policy: Skip})
	var le *LineError
	if !errors.As(err, &le) || le.Line != 3 {
		t.Fatalf("syntax error: %v, want line 3", err)
	}
	// application/json without brackets is NDJSON.
	rows, _, err = decodeAll(t, "{\"a\":1}\n{\"a\":2}\n", DecodeOptions{Format: JSONArray})
	if err != nil || len(rows) != 2 {
		t.Fatalf("ndjson as json: %v %v", rows, err)
	}
}

func TestCSVSchemaAndBadLines(t *testing.T) {
	in := "user,ts,n,score,ok\nann,2024-05-01T10:00:00Z,3,1.5,true\nbob,1714557600,x,2,false\ncid,,4,,\n\"unterminated,1,2\n"
	schema := map[string]compute.Type{"ts": compute.Timestamp, "n": compute.Int64, "score": compute.Float64, "ok": compute.Bool}
	_, _, err := decodeAll(t, in, DecodeOptions{Format: CSV, Schema: schema})
	var le *LineError
	if !errors.As(err, &le) || le.Line != 3 || !strings.Contains(err.Error(), `column "n"`) {
		t.Fatalf("reject: %v, want line 3 column n", err)
	}
	rows, d, err := decodeAll(t, in, DecodeOptions{Format: CSV, Schema: schema, Policy: Skip})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || d.BadCount != 2 || d.BadLines[0].Line != 3 || d.BadLines[1].Line != 5 {
		t.Fatalf("rows %v bad %v", rows, d.BadLines)
	}
	want := Row{"user": "ann", "ts": time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC), "n": int64(3), "score": 1.5, "ok": true}
	for k, v := range want {
		if rows[0][k] != v {
			t.Errorf("%s = %#v, want %#v", k, rows[0][k], v)
		}
	}
	if _, has := rows[1]["ts"]; has || rows[1]["n"] != int64(4) {
		t.Errorf("empty fields must be null (absent): %v", rows[1])
	}
	// Without a schema, types are inferred.
	rows, _, err = decodeAll(t, "a,b,c,d\n1,2.5,true,x\n", DecodeOptions{Format: CSV})
	if err != nil || rows[0]["a"] != int64(1) || rows[0]["b"] != 2.5 || rows[0]["c"] != true || rows[0]["d"] != "x" {
		t.Fatalf("inferred: %v %v", rows, err)
	}
}

func TestGzipAndBatches(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	for i := 0; i < 25; i++ {
		json.NewEncoder(zw).Encode(map[string]int{"i": i})
	}
	zw.Close()
	r, err := MaybeGunzip(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	d, err := Decode(r, DecodeOptions{BatchRows: 10}, func(b []Row, _ []int) error { sizes = append(sizes, len(b)); return nil })
	if err != nil || d.Rows != 25 || len(sizes) != 3 || sizes[2] != 5 {
		t.Fatalf("rows %d sizes %v err %v", d.Rows, sizes, err)
	}
	r, _ = MaybeGunzip(strings.NewReader(`{"x":1}`))
	if b, _ := io.ReadAll(r); string(b) != `{"x":1}` {
		t.Fatalf("plain input changed: %q", b)
	}
}

func TestFormatOf(t *testing.T) {
	for ct, want := range map[string]Format{"": NDJSON, "application/x-ndjson": NDJSON, "application/json; charset=utf-8": JSONArray, "text/csv": CSV} {
		if got, err := FormatOf(ct); err != nil || got != want {
			t.Errorf("FormatOf(%q) = %v, %v", ct, got, err)
		}
	}
	if _, err := FormatOf("image/png"); !errors.Is(err, ErrUnsupportedFormat) {
		t.Errorf("image/png: %v", err)
	}
	if FormatOfPath("x/events.CSV.gz") != CSV || FormatOfPath("a.jsonl") != NDJSON || FormatOfPath("a.json") != JSONArray {
		t.Error("FormatOfPath")
	}
}

// FuzzDecode: any input decodes without panicking, every bad line has a
// positive number, and rows + bad lines never exceed the lines of input.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{bad\n"), uint8(0))
	f.Add([]byte("[{\"a\":1},2]"), uint8(1))
	f.Add([]byte("a,b\n1,\"x\n2,3,4\n"), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, format uint8) {
		opts := DecodeOptions{Format: Format(format%3 + 1), Policy: Skip, Schema: map[string]compute.Type{"a": compute.Int64}}
		d, err := Decode(bytes.NewReader(data), opts, func([]Row, []int) error { return nil })
		if err != nil && !errors.Is(err, ErrBadInput) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		lines := bytes.Count(data, []byte{'\n'}) + 1
		for _, e := range d.BadLines {
			if e.Line < 1 || e.Line > lines {
				t.Fatalf("bad line number %d of %d lines", e.Line, lines)
			}
		}
	})
}

func TestDecodeLines(t *testing.T) {
	var lines []int
	collect := func(_ []Row, l []int) error { lines = append(lines, l...); return nil }
	if _, err := Decode(strings.NewReader("{\"a\":1}\n\nbad\n{\"a\":2}\n"), DecodeOptions{Policy: Skip, BatchRows: 1}, collect); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(lines) != "[1 4]" {
		t.Fatalf("ndjson lines %v, want [1 4]", lines)
	}
	lines = nil
	if _, err := Decode(strings.NewReader("a\n1\n\"x\ny\"\n2\n"), DecodeOptions{Format: CSV}, collect); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(lines) != "[2 3 5]" {
		t.Fatalf("csv lines %v, want [2 3 5] (a quoted field spans lines 3-4)", lines)
	}
}

// The 415 message lists every accepted type (Parquet and text/plain were
// missing), and curl -d's form type says what to send instead.
func TestFormatOfErrorsSayWhatToSend(t *testing.T) {
	_, err := FormatOf("image/png")
	for _, want := range []string{"application/x-ndjson", "application/json", "text/csv", "application/vnd.apache.parquet", "text/plain"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("FormatOf(image/png) = %v, want it to list %s", err, want)
		}
	}
	_, err = FormatOf("application/x-www-form-urlencoded")
	if !errors.Is(err, ErrUnsupportedFormat) || !strings.Contains(err.Error(), "--data-binary") || !strings.Contains(err.Error(), "Content-Type: application/x-ndjson") {
		t.Errorf("form type: %v, want a 415 saying to send --data-binary with an NDJSON content type", err)
	}
}

// TestInvalidUTF8IsABadLine: a line (NDJSON, a JSON array element, a CSV
// field) with bytes that are not UTF-8 is a bad line naming the line and
// the byte, not a row with U+FFFD in place of the bytes: two keys that
// differed only there became one partition. Valid multi-byte text and
// escapes pass unchanged.
func TestInvalidUTF8IsABadLine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format Format
		in     string
		line   int
	}{
		{"ndjson value", NDJSON, "{\"k\":\"é\"}\n{\"k\":\"a\xffb\"}\n", 2},
		{"ndjson key", NDJSON, "{\"k\":1}\n\n{\"k\xc3\":1}\n", 3},
		{"json array", JSONArray, "[{\"k\":\"ü\"},\n{\"k\":\"\xfe\"}]", 2},
		{"csv field", CSV, "k,v\nü,1\na\xff,2\n", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := decodeAll(t, tc.in, DecodeOptions{Format: tc.format})
			var le *LineError
			if !errors.Is(err, ErrInvalidUTF8) || !errors.As(err, &le) || le.Line != tc.line || !strings.Contains(err.Error(), "at byte") {
				t.Fatalf("err = %v, want invalid UTF-8 on line %d naming the byte", err, tc.line)
			}
			rows, d, err := decodeAll(t, tc.in, DecodeOptions{Format: tc.format, Policy: Skip})
			if err != nil || len(rows) != 1 || d.BadCount != 1 {
				t.Fatalf("skip: %v, %d rows, %d bad", err, len(rows), d.BadCount)
			}
			for _, v := range rows[0] {
				if s, ok := v.(string); ok && strings.ContainsRune(s, '\uFFFD') {
					t.Fatalf("the good row was changed: %q", s)
				}
			}
		})
	}
	// Escapes and valid text are untouched.
	rows, _, err := decodeAll(t, "{\"k\":\"\\u00e9 日本\"}\n", DecodeOptions{Format: NDJSON})
	if err != nil || rows[0]["k"] != "é 日本" {
		t.Fatalf("valid text: %v %v", rows, err)
	}
}

// failingReader returns its input, then err at every read.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, f.err
	}
	return n, err
}

// TestCSVReadErrorEndsDecode: an error of the reader under CSV (a size
// bound passed, a body cut short) ends the decode with that error, under
// on_bad_line: skip too; it is no bad line to skip and read past.
func TestCSVReadErrorEndsDecode(t *testing.T) {
	errBound := errors.New("past the bound")
	done := make(chan error, 1)
	go func() {
		r := &failingReader{r: strings.NewReader("a,b\n1,2\n3,"), err: errBound}
		_, err := Decode(r, DecodeOptions{Format: CSV, Policy: Skip, BadLine: func(*LineError) {}}, func([]Row, []int) error { return nil })
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, errBound) {
			t.Errorf("Decode: %v, want the reader's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Decode did not end on the reader's error")
	}
}
