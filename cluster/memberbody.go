package cluster

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"sync"
)

// The headers of a cluster query (docs/cluster.md).
const (
	// HeaderCoordinator carries the coordinating node's id on the requests
	// it sends to every member.
	HeaderCoordinator = "Sluice-Coordinator"
	// HeaderMissing lists the nodes a partial answer lacks: in the header
	// the nodes that failed before the answer started, in the trailer all
	// of them, with those that failed in the middle of theirs.
	HeaderMissing = "Sluice-Missing-Nodes"
	// HeaderAsked lists the members a cluster query asked (the
	// coordinator aside).
	HeaderAsked = "Sluice-Nodes-Asked"
	// HeaderOffsets carries, on a member's answer to a cluster query, the
	// source offsets its store's rows hold (Offsets.String).
	HeaderOffsets = "Sluice-Offsets"
)

// MemberBody is the request body of a cluster query to a member: the
// query, then the member's share of source offsets (one line), with
// heartbeats (a space) while the coordinator works or reads other
// members' answers, the mark (ownPartRead) once the coordinator has read
// its own part, and its end when the coordinator starts reading this
// member's answer (End) or the query ends (done); the request's context's
// error when it ends first (the transport waits for the body's writer
// before a cancelled request returns). ReadMemberBody is the member's
// side.
type MemberBody struct {
	ctx     context.Context
	done    <-chan struct{}
	ended   chan struct{}
	endOnce sync.Once
	mu      sync.Mutex
	pending []byte
	wake    chan struct{}
}

// ownPartRead is the byte that tells a member the coordinator has read
// its own part: the member's hold may end once its own rows are out.
const ownPartRead = '.'

// NewMemberBody is a body that starts with query and ends when done
// closes at the latest.
func NewMemberBody(ctx context.Context, query []byte, done <-chan struct{}) *MemberBody {
	return &MemberBody{ctx: ctx, done: done, ended: make(chan struct{}), pending: bytes.Clone(query), wake: make(chan struct{}, 1)}
}

// End ends the body once what is pending is read.
func (b *MemberBody) End() { b.endOnce.Do(func() { close(b.ended) }) }

// SendShare queues the member's share of source offsets.
func (b *MemberBody) SendShare(keep Offsets) { b.send([]byte(keep.String() + "\n")) }

// send queues p after what is pending.
func (b *MemberBody) send(p []byte) {
	b.mu.Lock()
	b.pending = append(b.pending, p...)
	b.mu.Unlock()
	b.notify()
}

// beat queues a heartbeat unless bytes are pending anyway.
func (b *MemberBody) beat() {
	b.mu.Lock()
	if len(b.pending) == 0 {
		b.pending = append(b.pending, ' ')
	}
	b.mu.Unlock()
	b.notify()
}

func (b *MemberBody) notify() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *MemberBody) Read(p []byte) (int, error) {
	for {
		b.mu.Lock()
		if len(b.pending) > 0 {
			n := copy(p, b.pending)
			b.pending = b.pending[n:]
			b.mu.Unlock()
			return n, nil
		}
		b.mu.Unlock()
		select {
		case <-b.wake:
		case <-b.ended:
			b.mu.Lock()
			left := len(b.pending)
			b.mu.Unlock()
			if left == 0 {
				return 0, io.EOF
			}
		case <-b.done:
			b.End()
		case <-b.ctx.Done():
			return 0, context.Cause(b.ctx)
		}
	}
}

// MemberBodyReader is what a member reads of its request body after the
// query (MemberBody writes it).
type MemberBodyReader struct {
	Keep        chan Offsets  // the share, once (nil: it did not parse)
	OwnPartRead chan struct{} // the coordinator has read its own part (the mark, or the body's end)
	Ended       chan struct{} // the body ended (Err: how, nil at EOF)
	Err         error
}

// ReadMemberBody reads rest on its own goroutine: the share line when
// share, then heartbeats, each of which is progress, and the mark, to the
// end, which is the coordinator's turn to read this answer: the watch is
// disarmed (no more heartbeats come) and turn bounds each write instead.
func ReadMemberBody(rest io.Reader, share bool, watch *StallWatch, turn *ReaderTurn) *MemberBodyReader {
	b := &MemberBodyReader{Keep: make(chan Offsets, 1), OwnPartRead: make(chan struct{}), Ended: make(chan struct{})}
	markSeen := sync.OnceFunc(func() { close(b.OwnPartRead) })
	go func() {
		br := bufio.NewReader(rest)
		var line []byte
		for {
			c, err := br.ReadByte()
			if err != nil {
				if err != io.EOF {
					b.Err = err
				}
				watch.Stop()
				turn.begin()
				markSeen()
				close(b.Ended)
				return
			}
			watch.Progress()
			switch {
			case c == ' ': // a heartbeat
			case share && c == '\n':
				keep, err := ParseOffsets(string(line))
				if err != nil {
					b.Err = err
				}
				b.Keep <- keep
				share = false
			case share:
				line = append(line, c)
			case c == ownPartRead:
				markSeen()
			}
		}
	}()
	return b
}
