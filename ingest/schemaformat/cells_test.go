package schemaformat

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/internal/testregistry"
)

// TestParseDateTimeMatchesTimeParse: the date-time fast path gives what
// time.Parse(time.RFC3339Nano) gives, in UTC, and refuses what it refuses,
// over the forms producers write, fields at and past their ranges, leap
// days and random instants.
func TestParseDateTimeMatchesTimeParse(t *testing.T) {
	cases := []string{
		"2024-05-01T00:00:00Z", "2024-05-01T00:00:00.037Z", "2024-05-01T23:59:59.999999999Z", "2024-05-01T00:00:00.5Z",
		"2024-02-29T12:00:00Z", "2023-02-29T12:00:00Z", "2100-02-29T00:00:00Z", "2000-02-29T00:00:00Z", "2024-04-31T00:00:00Z",
		"2024-12-31T24:00:00Z", "2024-12-31T23:60:00Z", "2024-12-31T23:59:60Z", "2024-13-01T00:00:00Z", "2024-00-01T00:00:00Z",
		"2024-01-00T00:00:00Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "2024-05-01T00:00:00.Z",
		"2024-05-01T00:00:00.1234567890Z", "2024-05-01T00:00:00+02:00", "2024-05-01T00:00:00.25-07:30",
		"2024-05-01t00:00:00Z", "2024-05-01T00:00:00z", "2024-05-01 00:00:00Z", "2024-5-01T00:00:00Z", "2024-05-01T00:00:0xZ",
		"2024-05-01T00:00:00,5Z", "", "Z", "2024-05-01T00:00:00.+5Z", "-024-05-01T00:00:00Z",
	}
	rnd := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		tm := time.Unix(rnd.Int64N(1<<36)-1<<35, rnd.Int64N(1e9)).UTC()
		cases = append(cases, tm.Format(time.RFC3339Nano), tm.Format(time.RFC3339))
	}
	for _, s := range cases {
		sameDateTime(t, s)
	}
}

func sameDateTime(t *testing.T, s string) {
	t.Helper()
	want, werr := time.Parse(time.RFC3339Nano, s)
	got, err := parseDateTime(s)
	if (err != nil) != (werr != nil) {
		t.Fatalf("%q: error %v, time.Parse's %v", s, err, werr)
	}
	if werr == nil && (!got.Equal(want) || got.Location() != time.UTC) {
		t.Fatalf("%q: %v, time.Parse's %v (want it in UTC)", s, got, want.UTC())
	}
}

func FuzzParseDateTime(f *testing.F) {
	f.Add("2024-05-01T00:00:00.037Z")
	f.Add("2024-02-29T23:59:59Z")
	f.Fuzz(sameDateTime)
}

// TestTimeCellsKeepTheirValues: the timestamps of a batch's cells, laid
// in shared blocks, each keep their own value (over several blocks, and
// after collections), and a batch of Protobuf rows costs no allocation a
// row for them.
func TestTimeCellsKeepTheirValues(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{})
	id := reg.Register("t-value", testregistry.Schema{Schema: `syntax = "proto3";
import "google/protobuf/timestamp.proto";
message T { google.protobuf.Timestamp at = 1; string s = 2; }`, SchemaType: "PROTOBUF"})
	d := newDecoder(t, FormatProtobuf, Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
	msgOf := func(k int) []byte {
		var ts []byte
		ts = protowire.AppendTag(ts, 1, protowire.VarintType)
		ts = protowire.AppendVarint(ts, uint64(1714521600+k))
		ts = protowire.AppendTag(ts, 2, protowire.VarintType)
		ts = protowire.AppendVarint(ts, uint64(k))
		body := protowire.AppendTag([]byte{0}, 1, protowire.BytesType)
		body = protowire.AppendBytes(body, ts)
		body = protowire.AppendTag(body, 2, protowire.BytesType)
		return frame(id, protowire.AppendString(body, "same"))
	}
	const n = 3*timeBlock + 7
	msgs := make([][]byte, n)
	for k := range msgs {
		msgs[k] = msgOf(k)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var cb colbatch.Batch
	rows := d.Rows(&cb)
	for k, msg := range msgs {
		if err := rows.Append(ctx, msg, k+1); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC()
	at := cb.Find("at")
	for k := range n {
		v, _ := cb.Any(cb.Cols[at].Cells[k])
		if want := time.Unix(1714521600+int64(k), int64(k)).UTC(); v != any(want) {
			t.Fatalf("row %d: %#v, want %v", k, v, want)
		}
	}
	allocs := testing.AllocsPerRun(5, func() {
		cb.Reset()
		rows := d.Rows(&cb)
		for k, msg := range msgs {
			if err := rows.Append(ctx, msg, k+1); err != nil {
				t.Fatal(err)
			}
		}
	})
	// The blocks (4), the Rows, its column indexes and kept strings;
	// one a timestamp would be n.
	if allocs > 20 {
		t.Errorf("%.0f allocations for %d rows, want ≤ 20", allocs, n)
	}
}

// TestProtoStringsChecked: a string that is not valid UTF-8 is refused
// (as dynamicpb refuses it), short or long; the strings of a batch, laid
// one after another in shared chunks, each keep their own value across
// chunks (values short and long, many rows, after collections).
func TestProtoStringsChecked(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{})
	id := reg.Register("s-value", testregistry.Schema{Schema: `syntax = "proto3"; message S { string s = 1; }`, SchemaType: "PROTOBUF"})
	d := newDecoder(t, FormatProtobuf, Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
	msgOf := func(s string) []byte {
		b := protowire.AppendTag([]byte{0}, 1, protowire.BytesType)
		return frame(id, protowire.AppendString(b, s))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var cb colbatch.Batch
	rows := d.Rows(&cb)
	var want []string
	for k := range 3000 {
		s := fmt.Sprint("v", k, strings.Repeat("é", k%50))
		if k%500 == 0 {
			s = strings.Repeat("long", maxArenaString/3) // a string of its own
		}
		if err := rows.Append(ctx, msgOf(s), cb.Len+1); err != nil {
			t.Fatal(err)
		}
		want = append(want, s)
		if k%1000 == 0 {
			for _, bad := range []string{"a\xffb", "\xc3", strings.Repeat("x", maxArenaString) + "\xff"} {
				if err := rows.Append(ctx, msgOf(bad), cb.Len+1); !errors.Is(err, ErrBody) || !strings.Contains(err.Error(), "not valid UTF-8") {
					t.Errorf("%.20q: %v, want ErrBody saying not valid UTF-8", bad, err)
				}
			}
		}
	}
	runtime.GC()
	c := cb.Find("s")
	for k, w := range want {
		if got := cb.Cols[c].Cells[k].S; got != w {
			t.Fatalf("row %d: %.40q, want %.40q", k, got, w)
		}
	}
}

// TestProtoOneByteTagsOfAnotherWireType: a field numbered 1 to 15 sent
// with a wire type other than its own is an unknown field (skipped, the
// column its zero value), as dynamicpb reads it, not read as the field.
func TestProtoOneByteTagsOfAnotherWireType(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{})
	id := reg.Register("w-value", testregistry.Schema{Schema: `syntax = "proto3";
message W { bool b = 1; int64 i = 2; double f = 3; string s = 4; }`, SchemaType: "PROTOBUF"})
	d := newDecoder(t, FormatProtobuf, Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
	var msgs [][]byte
	for _, body := range [][]byte{
		protowire.AppendFixed64(protowire.AppendTag(nil, 1, protowire.Fixed64Type), 1),
		protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "12"),
		protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 7),
		protowire.AppendFixed32(protowire.AppendTag(nil, 4, protowire.Fixed32Type), 7),
		// Their own types after the others: the value is the last one's.
		protowire.AppendVarint(protowire.AppendTag(protowire.AppendFixed64(protowire.AppendTag(nil, 2, protowire.Fixed64Type), 9), 2, protowire.VarintType), 5),
	} {
		msgs = append(msgs, frame(id, append([]byte{0}, body...)))
	}
	sameCells(t, d, msgs)
	var cb colbatch.Batch
	if err := d.Rows(&cb).Append(context.Background(), msgs[0], 1); err != nil {
		t.Fatal(err)
	}
	if v, _ := cb.Any(cb.Cols[cb.Find("b")].Cells[0]); v != false {
		t.Errorf("b sent as fixed64: %v, want false (an unknown field)", v)
	}
}

// TestJSONRowsTimestampText: a date-time property whose column is
// declared a timestamp keeps its text when it is in the UTC form (its
// column parses it), is converted when it has an offset, and is refused
// when it is no date-time, as without the declaration.
func TestJSONRowsTimestampText(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{})
	id := reg.Register("j-value", testregistry.Schema{Schema: `{"type":"object","properties":{"at":{"type":"string","format":"date-time"},
 "other":{"type":"string","format":"date-time"}}}`, SchemaType: "JSON"})
	d := newDecoder(t, FormatJSONSchema, Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	jr := d.JSONRows()
	jr.TimestampColumns(map[string]coltype.Type{"at": coltype.Timestamp, "other": coltype.String})
	_, types, err := jr.Body(ctx, frame(id, []byte(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	var cb colbatch.Batch
	for _, at := range []string{"2026-01-02T03:04:05.5Z", "2026-01-02T05:04:05+02:00"} {
		r := cb.AddRow(cb.Len + 1)
		cb.Set(cb.ColumnOf("at"), r, at)
		cb.Set(cb.ColumnOf("other"), r, "2026-01-02T03:04:05Z")
	}
	if _, err := jr.Convert(&cb, 0, cb.Len, types); err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for r, w := range []any{"2026-01-02T03:04:05.5Z", want} {
		if got, _ := cb.Any(cb.Cols[cb.Find("at")].Cells[r]); got != w {
			t.Errorf("row %d: at %#v, want %#v", r, got, w)
		}
		if got, _ := cb.Any(cb.Cols[cb.Find("other")].Cells[r]); got != any(want) {
			t.Errorf("row %d: other (not a timestamp column) %#v, want %v", r, got, want)
		}
	}
	for _, bad := range []string{"2023-02-29T00:00:00Z", "yesterday"} {
		var cb colbatch.Batch
		cb.Set(cb.ColumnOf("at"), cb.AddRow(1), bad)
		if row, err := jr.Convert(&cb, 0, 1, types); row != 0 || err == nil || !strings.Contains(err.Error(), "date-time") {
			t.Errorf("%q: row %d, %v; want row 0 refused, naming the date-time", bad, row, err)
		}
	}
}
