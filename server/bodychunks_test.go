package server

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http/httptest"
	"reflect"
	"runtime"
	"testing"

	"github.com/sluicedb/sluice/config"
)

// readWhole is what handleRows does with a body: readBody, read it to
// the end, release.
func readWhole(t *testing.T, s *Server, body []byte, withLength bool) []byte {
	t.Helper()
	r := httptest.NewRequest("POST", "/v1/tables/t/rows", bytes.NewReader(body))
	if !withLength {
		r.ContentLength = -1
	}
	b, release, err := s.readBody(httptest.NewRecorder(), r)
	defer release()
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(b)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func chunkTestServer() *Server {
	cfg := &config.Config{}
	cfg.Limits.MaxBodyBytes = 8 << 20
	return &Server{cfg: cfg, bodyBudget: 1 << 30}
}

// TestBodyChunksReused: the chunks of a body go back to a pool once read,
// and the next bodies get them without seeing what they held.
func TestBodyChunksReused(t *testing.T) {
	s := chunkTestServer()
	for i, size := range []int{0, 1, 4095, 4096, 200_000, 3 << 20, 100, 200_000} {
		for _, withLength := range []bool{true, false} {
			body := bytes.Repeat([]byte{byte('a' + i)}, size)
			if got := readWhole(t, s, body, withLength); !bytes.Equal(got, body) {
				t.Fatalf("body %d (%d bytes, length %v): read %d bytes, equal %v", i, size, withLength, len(got), bytes.Equal(got, body))
			}
		}
	}
	if s.bodyBytes.Load() != 0 {
		t.Fatalf("%d body bytes still reserved", s.bodyBytes.Load())
	}
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random: the allocations are not measured")
	}
	// A 200 KB body allocated its 252 KB of chunks each time.
	body := bytes.Repeat([]byte(fmt.Sprintf("%0199d\n", 7)), 1000)
	withLength := false
	discard := func() {
		r := httptest.NewRequest("POST", "/v1/tables/t/rows", bytes.NewReader(body))
		if !withLength {
			r.ContentLength = -1
		}
		b, release, err := s.readBody(httptest.NewRecorder(), r)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, b)
		release()
	}
	// With a Content-Length, the last chunk (73 KB) was cut to the
	// length, and allocated each time.
	for _, withLength = range []bool{false, true} {
		discard()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const n = 50
		for range n {
			discard()
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 32<<10 {
			t.Errorf("reading a %d-byte body (Content-Length given: %v) allocated %d bytes: its chunks were not reused", len(body), withLength, per)
		}
	}
}

// TestBodyDecodedInPlace: an NDJSON body is decoded from its chunks where
// its lines lie (ingest.Chunked), lines across chunks joined; the answer
// (rows, bad lines and their numbers, the error of a rejected batch, the
// bytes counted) is the one of the same rows read through a reader, as a
// gzip body is.
func TestBodyDecodedInPlace(t *testing.T) {
	s := startServer(t, `
listen: {http: "127.0.0.1:0"}
limits: {max_body_bytes: 1048576}
tables:
  - {name: skip, on_bad_line: skip, sortBy: ts, schema: [{name: user, type: string}, {name: ts, type: timestamp}, {name: n, type: int64}]}
  - {name: reject, on_bad_line: reject, sortBy: ts, schema: [{name: user, type: string}, {name: ts, type: timestamp}, {name: n, type: int64}]}
`, "")
	var body bytes.Buffer
	for i := range 4000 {
		switch {
		case i%397 == 5:
			body.WriteString(`{"user":"bad",` + "\n") // a bad line, here and there across a chunk's end
		case i%11 == 0:
			fmt.Fprintf(&body, "  {\"user\":\"u%d\",\"n\":%d}\r\n", i, i)
		case i%13 == 0:
			body.WriteString("\n")
		default:
			fmt.Fprintf(&body, `{"user":"u%d","n":%d}`+"\n", i, i)
		}
	}
	body.WriteString(`{"user":"last","n":1}`) // no newline
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(body.Bytes())
	zw.Close()
	for _, table := range []string{"skip", "reject"} {
		url := s.url + "/v1/tables/" + table + "/rows"
		code, want, _ := post(t, url, "application/x-ndjson", bytes.NewReader(gz.Bytes()))
		if table == "skip" && (code != 200 || want["accepted"] != float64(3711) || want["failed"] != float64(11)) {
			t.Fatalf("gzip body into %s: %d %v", table, code, want)
		}
		if table == "reject" && code != 400 {
			t.Fatalf("gzip body into %s: %d %v", table, code, want)
		}
		for _, withLength := range []bool{true, false} {
			var r io.Reader = bytes.NewReader(body.Bytes())
			if !withLength {
				r = io.MultiReader(r) // no length: sent chunked
			}
			gotCode, got, _ := post(t, url, "application/x-ndjson", r)
			if gotCode != code || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s, Content-Length given %v: %d %v\nwant (the same rows gzip'd) %d %v", table, withLength, gotCode, got, code, want)
			}
		}
	}
	if n := s.tables["skip"].pipe.Counters().Bytes.Load(); n != 3*int64(body.Len()) {
		t.Errorf("%d bytes counted, want 3 × %d", n, body.Len())
	}
}
