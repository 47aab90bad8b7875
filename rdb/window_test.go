package rdb

import (
	"bytes"
	"testing"
	"testing/iotest"
)

// TestWindowGrowsToTheValue reads one value much larger than the window
// from a stream: the window grows by doubling, but its last step stops at
// the value's size (without it, a 158 MB compressed value took a 256 MiB
// window, not 152 MiB).
func TestWindowGrowsToTheValue(t *testing.T) {
	const size = 20<<20 + 12345 // over maxRetainedBuffer, 4 KiB of window doubled to 32 MiB before
	data := bytes.Repeat([]byte{'x'}, size+10)
	r := reader{src: iotest.HalfReader(bytes.NewReader(data)), initSize: 4 << 10, crcOn: true}
	got, err := r.read(size)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != size {
		t.Fatalf("read %d bytes, want %d", len(got), size)
	}
	if len(r.buf) != size {
		t.Errorf("window of %d bytes for a %d-byte value, want %d", len(r.buf), size, size)
	}
}
