package ingest

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

type pqEvent struct {
	User  string    `parquet:"user"`
	N     int64     `parquet:"n"`
	Score float64   `parquet:"score"`
	OK    bool      `parquet:"ok"`
	Note  *string   `parquet:"note,optional"`
	Time  time.Time `parquet:"time,timestamp(microsecond)"`
}

func TestParquet(t *testing.T) {
	note := "hi"
	ts := time.Date(2024, 5, 1, 10, 0, 0, 123000, time.UTC)
	var buf bytes.Buffer
	if err := parquet.Write(&buf, []pqEvent{
		{User: "ann", N: 1, Score: 1.5, OK: true, Note: &note, Time: ts},
		{User: "bob", N: 2, Score: 2.5, Time: ts.Add(time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	rows, d, err := decodeAll(t, buf.String(), DecodeOptions{Format: Parquet})
	if err != nil || d.Rows != 2 {
		t.Fatalf("rows %v err %v", rows, err)
	}
	want := Row{"user": "ann", "n": int64(1), "score": 1.5, "ok": true, "note": "hi", "time": ts}
	for k, v := range want {
		if got := rows[0][k]; got != v {
			if gt, ok := got.(time.Time); !ok || !gt.Equal(v.(time.Time)) {
				t.Errorf("%s = %#v, want %#v", k, got, v)
			}
		}
	}
	if rows[1]["note"] != nil {
		t.Errorf("null note = %#v", rows[1]["note"])
	}
	if _, _, err := decodeAll(t, "PAR1 not really", DecodeOptions{Format: Parquet}); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "parquet") {
		t.Errorf("corrupt file: %v", err)
	}
	if FormatOfPath("x/part-1.parquet") != Parquet {
		t.Error("FormatOfPath .parquet")
	}
}
