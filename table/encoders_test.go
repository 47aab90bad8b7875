package table

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// TestEncodeDoesNotWaitForAnother: a block's compression never waits for
// the encodes of other appends (one shared encoder made concurrent batches
// compress one at a time).
func TestEncodeDoesNotWaitForAnother(t *testing.T) {
	payload := bytes.Repeat([]byte("sluice block payload "), 100)
	done := make(chan []byte, 1)
	go func() {
		// Encodes in progress on every P, and then some.
		var held []*zstd.Encoder
		for range runtime.GOMAXPROCS(0) + 2 {
			held = append(held, getEncoder())
		}
		v := compressBlock(nil, payload)
		for _, e := range held {
			putEncoder(e)
		}
		done <- v
	}()
	select {
	case v := <-done:
		if v[1] != codecZstd {
			t.Fatalf("codec %d, want zstd", v[1])
		}
		got, err := zstdDecode(v[2:], nil)
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("round trip: %v, equal %v", err, bytes.Equal(got, payload))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("an encode waited for the encoders other encodes hold")
	}
}

// TestDecodeDoesNotWaitForAnother: reading a block never waits for the
// decodes of other queries and scans (one shared decoder read them one at a
// time).
func TestDecodeDoesNotWaitForAnother(t *testing.T) {
	payload := bytes.Repeat([]byte("sluice block payload "), 100)
	v := compressBlock(nil, payload)
	type result struct {
		got []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		var held []*zstd.Decoder
		for range runtime.GOMAXPROCS(0) + 2 {
			held = append(held, getDecoder())
		}
		got, err := zstdDecode(v[2:], nil)
		for _, d := range held {
			putDecoder(d)
		}
		done <- result{got, err}
	}()
	select {
	case r := <-done:
		if r.err != nil || !bytes.Equal(r.got, payload) {
			t.Fatalf("round trip: %v, equal %v", r.err, bytes.Equal(r.got, payload))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a decode waited for the decoders other decodes hold")
	}
}

// TestWriteBlocksReusesItsMemory: grouping a batch into blocks and
// encoding them reuses the rows per block and the block buffers of the
// batches before (they were a third of the bytes an ingest allocated).
func TestWriteBlocksReusesItsMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random: the allocations are not measured")
	}
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "t", HashBy: "k", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	var rows []Row
	for i := range 1000 {
		rows = append(rows, Row{"k": fmt.Sprint("u", i%10), "ts": t0.Add(time.Duration(i) * 37 * time.Millisecond), "n": int64(i), "s": "view"})
	}
	cols, _, err := tb.coerce(rows, []Column{{"ts", Timestamp}, {"k", String}, {"n", Int64}, {"s", String}}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	pb := s.db.NewBatch()
	defer pb.Close()
	run := func() {
		pb.Reset()
		if _, _, err := tb.writeBlocksNumbered(pb, cols, func(int) (uint64, error) { return 1, nil }, nil); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if n := testing.AllocsPerRun(20, run); n > 10 {
		t.Errorf("%v allocations to write 1000 rows as 10 blocks, want a few per batch", n)
	}
}
