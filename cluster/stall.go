package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
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

// ErrReaderStalled ends a cluster query whose reader made no progress
// for the reader timeout.
var ErrReaderStalled = errors.New("the reader made no progress")

// StallWatch ends a member's answer when its coordinator makes no progress
// for limit: it cancels the query's context and breaks the connection's
// pending reads and writes, so that the handler returns and releases its
// hold.
type StallWatch struct {
	last     atomic.Int64 // unix nanoseconds of the last progress
	stopOnce sync.Once
	stop     chan struct{}
}

// WatchStall arms it: reader names who is watched in the cancel cause.
func WatchStall(limit time.Duration, rc *http.ResponseController, cancel context.CancelCauseFunc, reader string) *StallWatch {
	w := &StallWatch{stop: make(chan struct{})}
	w.Progress()
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
					cancel(fmt.Errorf("%w for %v: %s", ErrReaderStalled, limit, reader))
					_ = rc.SetWriteDeadline(time.Now())
					_ = rc.SetReadDeadline(time.Now())
					return
				}
			}
		}
	}()
	return w
}

// Progress records that the reader made progress now.
func (w *StallWatch) Progress() { w.last.Store(time.Now().UnixNano()) }

// Stop disarms the watch.
func (w *StallWatch) Stop() { w.stopOnce.Do(func() { close(w.stop) }) }

// ProgressWriter is a member's answer: each completed write is progress
// for its watch, and once the coordinator reads the answer (Turn) each
// write is bounded by the turn's limit.
type ProgressWriter struct {
	W     io.Writer
	Watch *StallWatch
	Turn  *ReaderTurn
}

func (p ProgressWriter) Write(b []byte) (int, error) {
	p.Turn.bound()
	n, err := p.W.Write(b)
	if n > 0 {
		p.Watch.Progress()
	}
	if err != nil && isTimeout(err) {
		err = fmt.Errorf("%w for %v: the coordinator: %w", ErrReaderStalled, p.Turn.limit, err)
	}
	return n, err
}

// ReaderTurn bounds each write to a reader by limit from the moment begin
// is called, when a watch of the reader's heartbeats no longer can.
type ReaderTurn struct {
	rc    *http.ResponseController
	limit time.Duration
	begun atomic.Bool
}

// NewReaderTurn bounds the writes of rc's answer by limit once its
// reader's turn begins.
func NewReaderTurn(rc *http.ResponseController, limit time.Duration) *ReaderTurn {
	return &ReaderTurn{rc: rc, limit: limit}
}

// begin bounds the write in progress, if any, and every later one.
func (t *ReaderTurn) begin() {
	t.begun.Store(true)
	t.bound()
}

// bound sets the connection's write deadline to limit from now, once the
// turn has begun.
func (t *ReaderTurn) bound() {
	if t.begun.Load() {
		_ = t.rc.SetWriteDeadline(time.Now().Add(t.limit))
	}
}

// DeadlineWriter bounds each write to a client by Limit (and by the
// query's own deadline, End): a client that stops reading fails the query
// after Limit, instead of after the query's timeout.
type DeadlineWriter struct {
	W     io.Writer
	RC    *http.ResponseController
	Limit time.Duration
	End   time.Time // the query's deadline; zero: none
}

func (d DeadlineWriter) Write(b []byte) (int, error) {
	end := time.Now().Add(d.Limit)
	if !d.End.IsZero() && d.End.Before(end) {
		end = d.End
	}
	_ = d.RC.SetWriteDeadline(end)
	n, err := d.W.Write(b)
	switch {
	case err == nil:
	case isTimeout(err):
		err = fmt.Errorf("%w: %w for %v: the client: %w", ErrClientWrite, ErrReaderStalled, d.Limit, err)
	default:
		err = fmt.Errorf("%w: %w", ErrClientWrite, err)
	}
	return n, err
}

// ErrClientWrite marks an error of writing to the query's client (it hung
// up or stopped reading), so that it is not taken for a member's failure.
var ErrClientWrite = errors.New("writing to the client")

// ClientLeft reports whether err ends a cluster query because its client
// went: a write to it failed, or the request's context was canceled, which
// net/http does when the client closes its connection (a member's answer
// then fails to read with "context canceled", which is not the member's
// failure).
func ClientLeft(ctx context.Context, err error) bool {
	return err != nil && (errors.Is(err, ErrClientWrite) || errors.Is(context.Cause(ctx), context.Canceled))
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// Heartbeat sends one byte to every member's request body at a steady
// pace until the coordinator reads the member's answer (the body has
// ended then): a member counts it as progress (WatchStall). A stopped
// coordinator (SIGSTOP) sends none.
type Heartbeat struct {
	mu     sync.Mutex
	bodies []*MemberBody
}

// Add beats on b too.
func (h *Heartbeat) Add(b *MemberBody) {
	h.mu.Lock()
	h.bodies = append(h.bodies, b)
	h.mu.Unlock()
}

// Run beats every period until done closes.
func (h *Heartbeat) Run(period time.Duration, done <-chan struct{}) {
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

// MarkOwnPartRead tells every member that the coordinator has read its
// own part.
func (h *Heartbeat) MarkOwnPartRead() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.bodies {
		b.send([]byte{ownPartRead})
	}
}
