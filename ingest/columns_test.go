package ingest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/colbatch"
)

// decodeBoth decodes in with Decode and with DecodeColumns (rows made
// back into maps) and fails t when rows, lines, counts or errors differ.
func decodeBoth(t *testing.T, in string, opts DecodeOptions) {
	t.Helper()
	var wantRows, gotRows []Row
	var wantLines, gotLines []int
	var wantParts, gotParts []int
	wd, werr := Decode(strings.NewReader(in), opts, func(rows []Row, lines []int) error {
		wantRows, wantLines = append(wantRows, rows...), append(wantLines, lines...)
		wantParts = append(wantParts, len(rows))
		return nil
	})
	gd, gerr := DecodeColumns(strings.NewReader(in), opts, func(cb *colbatch.Batch) error {
		gotRows, gotLines = append(gotRows, cb.Rows()...), append(gotLines, cb.Lines...)
		gotParts = append(gotParts, cb.Len)
		if len(cb.Lines) != cb.Len {
			t.Errorf("%d lines for %d rows", len(cb.Lines), cb.Len)
		}
		return nil
	})
	if fmt.Sprint(werr) != fmt.Sprint(gerr) {
		t.Fatalf("%.60q: DecodeColumns error %v, Decode %v", in, gerr, werr)
	}
	if !reflect.DeepEqual(gotRows, wantRows) || !reflect.DeepEqual(gotLines, wantLines) || !reflect.DeepEqual(gotParts, wantParts) {
		t.Fatalf("%.60q:\ncolumns %v lines %v parts %v\nmaps    %v lines %v parts %v", in, gotRows, gotLines, gotParts, wantRows, wantLines, wantParts)
	}
	if fmt.Sprint(gd) != fmt.Sprint(wd) {
		t.Fatalf("%.60q: decoded %+v, want %+v", in, gd, wd)
	}
}

// TestDecodeColumnsMatchesDecode: rows by column are the rows Decode
// makes, with the same lines, parts, bad lines and errors, over inputs
// whose keys change, that take the slow path, that are bad, in every
// format.
func TestDecodeColumnsMatchesDecode(t *testing.T) {
	mixed := strings.Join([]string{
		`{"a":1,"b":"x","c":2.5,"d":null,"e":true}`,
		``,
		`{"a":2,"b":"y","c":3,"d":"z","e":false}`,
		`{"b":"moved","a":3}`,
		`{"a":4,"n":{"x":[1,2]},"s":"caf\u00e9","big":9223372036854775808}`,
		`not json`,
		`{"a":"\xff"}`,
		`{"a":5,"a":6}`,
		`{}`,
		`{"f":1,"g":2,"h":3`,
		`[1,2]`,
		`{"a":-0,"b":1e3,"c":-9223372036854775808,"d":9223372036854775807,"e":"","g":-42,"h":-922337203685477580}`,
		`{"a":1,"b":"x","c":2.5,"d":null,"e":true}`,
	}, "\n")
	for _, policy := range []Policy{Skip, Reject} {
		for _, rows := range []int{0, 1, 2, 5} {
			decodeBoth(t, mixed, DecodeOptions{Policy: policy, BatchRows: rows})
			decodeBoth(t, "  \n"+mixed, DecodeOptions{Format: JSONArray, Policy: policy, BatchRows: rows})
		}
	}
	decodeBoth(t, "[\n"+`{"a":1,"b":"x"},`+"\n"+`{"b":"y","n":[1]},`+"\n"+`{"a":"\xff"}, 3`+"\n]", DecodeOptions{Format: JSONArray, Policy: Skip, BatchRows: 2})
	decodeBoth(t, "a,b,c\n1,x,2.5\n,y,true\n", DecodeOptions{Format: CSV, Policy: Skip, BatchRows: 1})
	// Ever-new keys: the batch drops its columns between parts.
	var wide strings.Builder
	for i := range 600 {
		fmt.Fprintf(&wide, `{"k%d":%d,"v":"x%d","w":1}`+"\n", i, i, i%7)
	}
	decodeBoth(t, wide.String(), DecodeOptions{Policy: Skip, BatchRows: 100})
	decodeBoth(t, wide.String(), DecodeOptions{Policy: Skip})
	// An emit error stops decoding and is returned as is.
	stop := errors.New("stop")
	if _, err := DecodeColumns(strings.NewReader(mixed), DecodeOptions{Policy: Skip, BatchRows: 1}, func(*colbatch.Batch) error { return stop }); err != stop {
		t.Fatalf("emit error: %v", err)
	}
}

// TestColumnsNoAllocationPerRow: decoding flat rows by column allocates
// per batch, not per row or value.
func TestColumnsNoAllocationPerRow(t *testing.T) {
	data := tenFieldRows(1000)
	run := func() {
		if _, err := DecodeColumns(strings.NewReader(string(data)), DecodeOptions{}, func(*colbatch.Batch) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if n := testing.AllocsPerRun(20, run); n > 50 {
		t.Errorf("%v allocations for 1000 rows, want a few per batch", n)
	}
}

// TestColumnsUnsetCellsAbsent: a row's cells are set only as its fields
// are scanned (colbatch.AddUnsetRow); the cells of the keys it lacks are
// Absent even where the batch's memory held other values past its rows
// (as a filter that shortened the columns leaves them), on the fast path,
// the slow path and after a bad line.
func TestColumnsUnsetCellsAbsent(t *testing.T) {
	cb := new(colbatch.Batch)
	stale := make([]colbatch.Cell, 8)
	for i := range stale {
		stale[i] = colbatch.Cell{Kind: colbatch.Int, I: 7}
	}
	a := cb.ColumnOf("a")
	cb.Cols[a].Cells = stale[:0]
	cd := &colDecoder{b: cb}
	lines := []string{`{"b":1}`, `{"a":2,"b":2}`, `{"b":3,"b":4}`, `{"b":{"x":5}}`, `{"b":6`, `{"b":"y"}`}
	for i, l := range lines {
		cd.decode([]byte(l), i+1)
	}
	want := []map[string]any{{"b": int64(1)}, {"a": int64(2), "b": int64(2)}, {"b": int64(4)}, {"b": map[string]any{"x": int64(5)}}, {"b": "y"}}
	if got := cb.Rows(); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
}

// TestDecodeColumnsKeyOrderAcrossInputs: a pooled decoder keeps its key
// order for the next input, and drops it when its batch dropped its
// columns, also when another format (which fills the batch without the
// key order) did so with fewer columns left after.
func TestDecodeColumnsKeyOrderAcrossInputs(t *testing.T) {
	var header, full strings.Builder
	for i := range 300 {
		if i > 0 {
			header.WriteByte(',')
			full.WriteByte(',')
		}
		fmt.Fprintf(&header, "c%d", i)
		fmt.Fprintf(&full, "%d", i)
	}
	csv := header.String() + "\n" + full.String() + "\n" + strings.Repeat(",", 5) + "5" + strings.Repeat(",", 294) + "\n"
	for range 20 { // the pool may drop a decoder: most rounds reuse one
		decodeBoth(t, `{"a":1,"b":"x"}`+"\n"+`{"a":2,"b":"y"}`, DecodeOptions{})
		decodeBoth(t, csv, DecodeOptions{Format: CSV, BatchRows: 1})
		decodeBoth(t, `{"a":3,"b":"z"}`, DecodeOptions{})
	}
}
