package rdbtool

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestProgressReader: the bar follows the bytes read, and a rewind of a
// seekable input restarts it; an input that cannot seek says so.
func TestProgressReader(t *testing.T) {
	p := &Progress{} // not drawing: only the position matters here
	r := ProgressReader(bytes.NewReader(make([]byte, 10000)), p)
	buf := make([]byte, 3000)
	if _, err := io.ReadFull(r, buf); err != nil {
		t.Fatal(err)
	}
	if got := p.pos.Load(); got != 3000 {
		t.Fatalf("position %d after 3000 bytes", got)
	}
	if _, err := r.(io.Seeker).Seek(0, io.SeekStart); err != nil || p.pos.Load() != 0 {
		t.Fatalf("after a rewind: position %d, err %v", p.pos.Load(), err)
	}
	n, _ := io.Copy(io.Discard, r)
	if n != 10000 || p.pos.Load() != 10000 {
		t.Fatalf("read %d, position %d", n, p.pos.Load())
	}
	if _, err := ProgressReader(strings.NewReader("x"), nil).(io.Seeker).Seek(0, io.SeekStart); err != nil {
		t.Fatalf("strings.Reader seeks: %v", err)
	}
	if _, err := ProgressReader(io.MultiReader(strings.NewReader("x")), nil).(io.Seeker).Seek(0, io.SeekStart); err == nil {
		t.Fatal("a reader that cannot seek was rewound")
	}
}
