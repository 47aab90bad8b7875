package cluster

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Query is a coordinator's side of one cluster query with its members
// (docs/cluster.md, "What is exact"): a request to every member at once,
// whose body is the query, then the member's share of source offsets,
// then heartbeats with a mark once the coordinator has read its own part;
// it ends when the coordinator starts reading the member's answer (its
// turn). Until then the heartbeats are the member's sign that the
// coordinator is alive: a member waiting for its turn behind another's
// answer is not cut off, a stopped coordinator's members are
// (WatchStall). The coordinator's node reads its own part in between
// (Share, OwnPartRead), then merges the members' answers in turn (Merge).
type Query struct {
	// Answers are the members', in the order of the nodes asked; those
	// with Err failed before their header.
	Answers []*Answer
	done    chan struct{}
	beats   *Heartbeat
	bodies  map[string]*MemberBody
}

// QueryOptions are what OpenQuery sends.
type QueryOptions struct {
	// URL is a node's URL of the query (POST).
	URL func(node string) string
	// Body is the query, the start of every member's request body.
	Body []byte
	// Coordinator is this node's id, sent in HeaderCoordinator: a member
	// that is this node answers 204 at once.
	Coordinator string
	// Beat is the pace of the heartbeats (a fraction of the members'
	// reader timeout).
	Beat time.Duration
}

// OpenQuery asks every node at once through f and returns once each has
// answered with its header (it holds its cold tier then), failed, or timed
// out. The caller must Close the query.
func OpenQuery(ctx context.Context, f *Fanout, nodes []string, o QueryOptions) *Query {
	q := &Query{done: make(chan struct{}), beats: &Heartbeat{}, bodies: map[string]*MemberBody{}}
	go q.beats.Run(max(o.Beat, time.Millisecond), q.done)
	var mu sync.Mutex
	q.Answers = f.Open(ctx, nodes, func(ctx context.Context, node string) (*http.Request, error) {
		mb := NewMemberBody(ctx, o.Body, q.done)
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, o.URL(node), mb)
		if err != nil {
			return nil, err
		}
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(HeaderCoordinator, o.Coordinator)
		q.beats.Add(mb)
		mu.Lock()
		q.bodies[node] = mb
		mu.Unlock()
		return r, nil
	})
	return q
}

// Close ends every member's request body and answer.
func (q *Query) Close() {
	for _, a := range q.Answers {
		a.Close()
	}
	close(q.done)
}

// Failed are the nodes that failed before their header, and why.
func (q *Query) Failed() (nodes []string, errs []error) {
	for _, a := range q.Answers {
		if a.Err != nil {
			nodes = append(nodes, a.Node)
			errs = append(errs, a.Err)
		}
	}
	return nodes, errs
}

// Share gives each source offset held by this node's store (own) or by a
// member's (its answer's HeaderOffsets) to one of them, this node first,
// sends every member its share on its request body, and returns this
// node's. A member that failed is left out: with partial, its share is
// missing as its rows are.
func (q *Query) Share(own Offsets) (Offsets, error) {
	held := []Offsets{own}
	var members []*MemberBody
	for _, a := range q.Answers {
		if a.Err != nil || a.Header.Get("Content-Type") == "" { // failed, or 204: this node itself
			continue
		}
		h, err := ParseOffsets(a.Header.Get(HeaderOffsets))
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", a.Node, err)
		}
		held = append(held, h)
		members = append(members, q.bodies[a.Node])
	}
	keep := Assign(held)
	for i, mb := range members {
		mb.SendShare(keep[i+1])
	}
	return keep[0], nil
}

// OwnPartRead tells every member that the coordinator has read its own
// part: a member's hold may end once its own rows are out.
func (q *Query) OwnPartRead() { q.beats.MarkOwnPartRead() }

// Merge reads the answers of the members that answered in turn, after the
// coordinator's own n rows, each through copy (left: the rows it may
// still copy, -1 for no limit), until limit rows (0: none). A member's
// body ends when its turn begins, which tells it that it is being read.
// skip leaves out an answer without reading it (nil: none). A member that
// fails mid-answer fails the merge (err, as copy returned it) unless
// partial: then it is among late. A client that left (ClientLeft) ends
// the merge with left true; no member failed then.
func (q *Query) Merge(ctx context.Context, n, limit int, partial bool, skip func(*Answer) bool,
	copy func(a *Answer, left int) (int, error)) (rows int, late []*NodeError, left bool, err error) {
	for _, a := range q.Answers {
		rest := -1 // no limit
		if limit > 0 {
			if rest = limit - n; rest <= 0 {
				break
			}
		}
		if a.Err != nil || (skip != nil && skip(a)) {
			continue
		}
		if mb := q.bodies[a.Node]; mb != nil {
			mb.End()
		}
		copied, err := copy(a, rest)
		n += copied
		if ClientLeft(ctx, err) {
			return n, late, true, err
		}
		if err != nil {
			if !partial {
				return n, late, false, err
			}
			late = append(late, &NodeError{Node: a.Node, Err: err})
		}
	}
	return n, late, false, nil
}
