package table

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
)

// hugeCols are the columns of four rows, one of them with a text value of
// n bytes from fill, and nulls, small strings and numbers around it.
func hugeCols(n int, fill func([]byte)) ([]colData, []int) {
	big := make([]byte, n)
	fill(big)
	cols := []colData{
		{name: "id", typ: Int64, vals: []value{{i: 1}, {i: -5}, {i: 7}, {i: 9}}, null: []bool{false, false, true, false}},
		{name: "score", typ: Float64, vals: []value{{}, {}, {}, {}}, null: []bool{true, true, true, true}},
		{name: "value", typ: JSON, vals: []value{{s: `"a"`}, {s: string(big)}, {}, {s: `{"k":1}`}}, null: []bool{false, false, true, false}},
		{name: "name", typ: String, vals: []value{{s: "x"}, {s: ""}, {s: "zz"}, {s: string(big[:5000])}}, null: []bool{false, false, false, false}},
	}
	return cols, []int{3, 0, 1, 2}
}

// TestWritePayloadMatchesEncodeBlock: the streamed payload of a huge block
// is byte for byte encodeBlock's.
func TestWritePayloadMatchesEncodeBlock(t *testing.T) {
	cols, idx := hugeCols(1<<20, func(b []byte) { rand.Read(b) })
	var got bytes.Buffer
	if err := writePayload(&got, cols, idx); err != nil {
		t.Fatal(err)
	}
	if want := encodeBlock(nil, cols, idx); !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("writePayload wrote %d bytes, encodeBlock %d: they differ", got.Len(), len(want))
	}
}

// TestHugeBlockDecodes writes huge blocks of text that compresses (base64)
// and of bytes that do not (stored uncompressed) straight into a batch,
// and decodes them as a query would.
func TestHugeBlockDecodes(t *testing.T) {
	for _, c := range []struct {
		name  string
		fill  func([]byte)
		codec byte
	}{
		{"base64", func(b []byte) {
			raw := make([]byte, len(b)*3/4)
			rand.Read(raw)
			base64.StdEncoding.Encode(b, raw)
		}, codecZstd},
		{"random", func(b []byte) { rand.Read(b) }, codecNone},
	} {
		t.Run(c.name, func(t *testing.T) {
			cols, idx := hugeCols(hugeBlockBytes+1, c.fill)
			b := new(pebble.Batch)
			n, err := setHugeBlock(b, []byte("key"), cols, idx)
			if err != nil {
				t.Fatal(err)
			}
			r := b.Reader()
			_, k, v, ok, err := r.Next()
			if !ok || err != nil || string(k) != "key" || len(v) != n {
				t.Fatalf("batch entry: %q, %d bytes (want %d), %v, %v", k, len(v), n, ok, err)
			}
			if v[1] != c.codec {
				t.Fatalf("codec %d, want %d", v[1], c.codec)
			}
			var d blockDecoder
			if err := d.decode(k, v, func(string) bool { return true }); err != nil {
				t.Fatal(err)
			}
			if want := encodeBlock(nil, cols, idx); !bytes.Equal(d.raw, want) {
				t.Fatalf("decoded payload of %d bytes differs from encodeBlock's %d", len(d.raw), len(want))
			}
			if c.codec == codecZstd && n > (hugeBlockBytes+1)*4/5 {
				t.Fatalf("base64 compressed to %d bytes: its literals were not entropy coded", n)
			}
		})
	}
}

// TestHugeRowRoundTrip appends a row with a value over hugeBlockBytes
// beside small rows, and queries every value back.
func TestHugeRowRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "keys", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, hugeBlockBytes)
	rand.Read(raw)
	big := base64.StdEncoding.EncodeToString(raw)
	rows := []Row{
		{"ts": t0, "key": "small", "n": int64(1)},
		{"ts": t0.Add(time.Second), "key": "big", "value": big},
		{"ts": t0.Add(2 * time.Second), "key": "null value", "n": int64(3)},
	}
	if err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	got := collect(t, tb, Query{From: t0.Add(-time.Hour), To: t0.Add(time.Hour)})
	if len(got) != 3 {
		t.Fatalf("%d rows back, want 3", len(got))
	}
	if got[1]["key"] != "big" || got[1]["value"] != big {
		t.Fatalf("the huge value did not come back (%d bytes)", len(got[1]["value"].(string)))
	}
	if got[0]["n"] != int64(1) || got[2]["n"] != int64(3) || got[0]["value"] != nil || got[1]["n"] != nil {
		t.Fatalf("the small rows came back as %v and %v", got[0], got[2])
	}
}
