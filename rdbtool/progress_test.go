package rdbtool

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestProgressLine(t *testing.T) {
	p := &Progress{total: 400e6, label: "export"}
	line := p.line(100e6, 2*time.Second)
	for _, want := range []string{"export [#######.......", " 25%", "100.0/400.0 MB", "50 MB/s", "eta 6s"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	if done := p.line(400e6, 8*time.Second); strings.Contains(done, "eta") || !strings.Contains(done, "100%") {
		t.Errorf("finished line %q", done)
	}
}

func TestProgressOnlyOnTerminal(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(&buf, "x", 100) // not a terminal: no bar
	if p != nil {
		t.Fatal("progress bar on a bytes.Buffer")
	}
	p.Set(50) // a nil *Progress is a no-op
	p.Finish()
	if buf.Len() != 0 {
		t.Errorf("wrote %q", buf.String())
	}
}
