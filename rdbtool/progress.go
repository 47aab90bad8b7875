package rdbtool

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"
)

// Progress draws a one-line progress bar for a file being parsed. It is
// hand-written rather than taken from a library because of where it is fed
// from: the parse loop calls Set once per key (millions of times a second),
// so Set must be a single atomic store with no lock, no clock read and no
// formatting; a separate goroutine redraws at 10 Hz. Libraries such as
// schollz/progressbar take a mutex and read the clock on every update.
//
// The zero Progress, and a nil *Progress, do nothing: Set and Finish are
// safe to call unconditionally.
type Progress struct {
	w     io.Writer
	total int64
	label string
	start time.Time

	done chan struct{}
	wg   sync.WaitGroup
	pos  atomic.Int64 // bytes processed so far, written by Set
}

// NewProgress starts a bar on w for a total of total bytes if w is a
// terminal (an *os.File for which term.IsTerminal holds) and total > 0;
// otherwise it returns nil, which is a valid no-op *Progress.
func NewProgress(w io.Writer, label string, total int64) *Progress {
	f, ok := w.(*os.File)
	if !ok || total <= 0 || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	p := &Progress{w: w, total: total, label: label, start: time.Now(), done: make(chan struct{})}
	p.wg.Add(1)
	go p.run()
	return p
}

// Set records that n bytes of the input have been processed.
func (p *Progress) Set(n int64) {
	if p != nil {
		p.pos.Store(n)
	}
}

// Finish stops the redraws and clears the line.
func (p *Progress) Finish() {
	if p == nil || p.done == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	close(p.done)
	p.wg.Wait()
	fmt.Fprint(p.w, "\r\033[K")
}

func (p *Progress) run() {
	defer p.wg.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
			fmt.Fprint(p.w, "\r"+p.line(p.pos.Load(), time.Since(p.start))+"\033[K")
		}
	}
}

// line renders the bar: label [#####.....]  45%  180.0/400.0 MB  850 MB/s  eta 1s
func (p *Progress) line(pos int64, elapsed time.Duration) string {
	const width = 30
	frac := float64(pos) / float64(p.total)
	frac = min(max(frac, 0), 1)
	filled := int(frac * width)
	var b strings.Builder
	b.WriteString(p.label)
	b.WriteString(" [")
	b.WriteString(strings.Repeat("#", filled))
	b.WriteString(strings.Repeat(".", width-filled))
	b.WriteString("]")
	mb := float64(pos) / 1e6
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = mb / s
	}
	fmt.Fprintf(&b, " %3.0f%%  %.1f/%.1f MB  %.0f MB/s", frac*100, mb, float64(p.total)/1e6, rate)
	if rate > 0 && pos < p.total {
		eta := time.Duration(float64(p.total-pos) / 1e6 / rate * float64(time.Second))
		fmt.Fprintf(&b, "  eta %s", eta.Round(time.Second))
	}
	return b.String()
}
