package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/config"
)

// A cluster query holds every node's cold tier (no commit) while its
// coordinator reads the Iceberg table, and a member's hold lasts until its
// own rows are out; a reader that stops reading must not keep those holds
// until the query's write timeout. Each node that holds for a cluster
// query bounds how long its reader may make no progress
// (cluster.reader_timeout): a member its coordinator, the coordinator its
// client (each write). Past it the query fails and the holds end.
//
// A member's coordinator makes progress by reading rows or by sending
// heartbeats on the request body, which it does until it starts reading
// the member's answer: while it works on its own part, and while it reads
// other members' answers before this one (it reads them in turn). From
// its turn, which ends the body, the coordinator only reads, so each write
// of the member's answer is bounded instead.

// errReaderStalled ends a cluster query whose reader made no progress
// for the reader timeout.
var errReaderStalled = errors.New("the reader made no progress")

// readerTimeout is cluster.reader_timeout, or its default.
func (s *Server) readerTimeout() time.Duration {
	if t := s.cfg.Cluster.ReaderTimeout; t > 0 {
		return t
	}
	return config.DefaultReaderTimeout
}

// stallWatch ends a member's answer when its coordinator makes no progress
// for limit: it cancels the query's context and breaks the connection's
// pending reads and writes, so that the handler returns and releases its
// hold.
type stallWatch struct {
	last     atomic.Int64 // unix nanoseconds of the last progress
	stopOnce sync.Once
	stop     chan struct{}
}

func watchStall(limit time.Duration, rc *http.ResponseController, cancel context.CancelCauseFunc, reader string) *stallWatch {
	w := &stallWatch{stop: make(chan struct{})}
	w.progress()
	tick := max(limit/8, time.Millisecond)
	go func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case now := <-t.C:
				if idle := now.Sub(time.Unix(0, w.last.Load())); idle >= limit {
					cancel(fmt.Errorf("%w for %v: %s", errReaderStalled, limit, reader))
					_ = rc.SetWriteDeadline(time.Now())
					_ = rc.SetReadDeadline(time.Now())
					return
				}
			}
		}
	}()
	return w
}

func (w *stallWatch) progress() { w.last.Store(time.Now().UnixNano()) }

// Stop disarms the watch.
func (w *stallWatch) Stop() { w.stopOnce.Do(func() { close(w.stop) }) }

// progressWriter is a member's answer: each completed write is progress
// for its watch, and once the coordinator reads the answer (turn) each
// write is bounded by limit.
type progressWriter struct {
	w     io.Writer
	watch *stallWatch
	turn  *readerTurn
}

func (p progressWriter) Write(b []byte) (int, error) {
	p.turn.bound()
	n, err := p.w.Write(b)
	if n > 0 {
		p.watch.progress()
	}
	if err != nil && isTimeout(err) {
		err = fmt.Errorf("%w for %v: the coordinator: %w", errReaderStalled, p.turn.limit, err)
	}
	return n, err
}

// readerTurn bounds each write to a reader by limit from the moment begin
// is called, when a watch of the reader's heartbeats no longer can.
type readerTurn struct {
	rc    *http.ResponseController
	limit time.Duration
	begun atomic.Bool
}

// begin bounds the write in progress, if any, and every later one.
func (t *readerTurn) begin() {
	t.begun.Store(true)
	t.bound()
}

// bound sets the connection's write deadline to limit from now, once the
// turn has begun.
func (t *readerTurn) bound() {
	if t.begun.Load() {
		_ = t.rc.SetWriteDeadline(time.Now().Add(t.limit))
	}
}

// deadlineWriter bounds each write to a client by limit (and by the
// query's own deadline): a client that stops reading fails the query
// after limit, instead of after the query's timeout.
type deadlineWriter struct {
	w     io.Writer
	rc    *http.ResponseController
	limit time.Duration
	end   time.Time // the query's deadline
}

func (d deadlineWriter) Write(b []byte) (int, error) {
	end := time.Now().Add(d.limit)
	if !d.end.IsZero() && d.end.Before(end) {
		end = d.end
	}
	_ = d.rc.SetWriteDeadline(end)
	n, err := d.w.Write(b)
	switch {
	case err == nil:
	case isTimeout(err):
		err = fmt.Errorf("%w: %w for %v: the client: %w", errClientWrite, errReaderStalled, d.limit, err)
	default:
		err = fmt.Errorf("%w: %w", errClientWrite, err)
	}
	return n, err
}

// errClientWrite marks an error of writing to the query's client (it hung
// up or stopped reading), so that it is not taken for a member's failure.
var errClientWrite = errors.New("writing to the client")

// heartbeat sends one byte to every member's request body at a steady
// pace until the coordinator reads the member's answer (the body has
// ended then): a member counts it as progress (watchStall). A stopped
// coordinator (SIGSTOP) sends none.
type heartbeat struct {
	mu     sync.Mutex
	bodies []*memberBody
}

func (h *heartbeat) add(b *memberBody) {
	h.mu.Lock()
	h.bodies = append(h.bodies, b)
	h.mu.Unlock()
}

// run beats every period until done closes.
func (h *heartbeat) run(period time.Duration, done <-chan struct{}) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			h.mu.Lock()
			for _, b := range h.bodies {
				b.beat()
			}
			h.mu.Unlock()
		}
	}
}

// markOwnPartRead tells every member that the coordinator has read its
// own part.
func (h *heartbeat) markOwnPartRead() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.bodies {
		b.send([]byte{ownPartRead})
	}
}
