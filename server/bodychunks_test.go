package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http/httptest"
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
	discard := func() {
		r := httptest.NewRequest("POST", "/v1/tables/t/rows", bytes.NewReader(body))
		r.ContentLength = -1
		b, release, err := s.readBody(httptest.NewRecorder(), r)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, b)
		release()
	}
	discard()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 50
	for range n {
		discard()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 32<<10 {
		t.Errorf("reading a %d-byte body allocated %d bytes: its chunks were not reused", len(body), per)
	}
}
