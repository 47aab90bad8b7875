package table

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// TestEncodeDoesNotWaitForAnother: a block's compression never waits for
// the encodes of other appends (one shared encoder made concurrent batches
// compress one at a time: issue 18).
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
		got, err := zstdDecoder.DecodeAll(v[2:], nil)
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("round trip: %v, equal %v", err, bytes.Equal(got, payload))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("an encode waited for the encoders other encodes hold")
	}
}
