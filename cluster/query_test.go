package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// member is a node answering a cluster query as sluice's members do: the
// header with the offsets it holds, then, once its share is in, its rows
// (one line per offset of its share, cut off after cut lines when cut > 0),
// then it waits for its turn (the body's end). It records the share.
type member struct {
	held  string
	cut   int
	mu    sync.Mutex
	share string
	ended chan struct{}
}

func (m *member) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()
	br := bufio.NewReader(r.Body)
	if _, err := br.ReadString('\n'); err != nil { // the query
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set(HeaderOffsets, m.held)
	w.WriteHeader(http.StatusOK)
	rc.Flush()
	line, err := br.ReadString('\n')
	for err == nil && strings.TrimLeft(line, " .") != line { // heartbeats and the mark before the share
		line = strings.TrimLeft(line, " .")
		if line != "" {
			break
		}
		line, err = br.ReadString('\n')
	}
	if err != nil {
		return
	}
	keep, err := ParseOffsets(strings.TrimSpace(line))
	if err != nil {
		return
	}
	m.mu.Lock()
	m.share = keep.String()
	m.mu.Unlock()
	n := 0
	for src, spans := range keep {
		for _, sp := range spans {
			for off := sp.Lo; off < sp.Hi; off++ {
				if m.cut > 0 && n == m.cut {
					panic(http.ErrAbortHandler) // the member dies mid-answer
				}
				fmt.Fprintf(w, "{\"src\":%q,\"off\":%d}\n", src, off)
				n++
			}
		}
	}
	io.Copy(io.Discard, br) // to the end of the body: this answer's turn
	close(m.ended)
}

func startMembers(t *testing.T, ms ...*member) []string {
	t.Helper()
	var nodes []string
	for _, m := range ms {
		m.ended = make(chan struct{})
		srv := httptest.NewServer(m)
		t.Cleanup(srv.Close)
		nodes = append(nodes, srv.URL)
	}
	return nodes
}

func openQuery(ctx context.Context, nodes []string) *Query {
	return OpenQuery(ctx, &Fanout{NodeTimeout: 5 * time.Second}, nodes, QueryOptions{
		URL:         func(node string) string { return node + "/q" },
		Body:        []byte("{}\n"),
		Coordinator: "coordinator",
		Beat:        10 * time.Millisecond,
	})
}

// TestQueryEachOffsetOnceInTurn: members holding the same offsets (and
// some the coordinator holds) are each given a disjoint share, their
// answers are merged in the order of the nodes, and each member's body
// ends (its turn) only when it is read.
func TestQueryEachOffsetOnceInTurn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := &member{held: "s@0-6"}, &member{held: "s@3-9"}
	cq := openQuery(ctx, startMembers(t, a, b))
	defer cq.Close()
	if nodes, errs := cq.Failed(); len(errs) > 0 {
		t.Fatalf("failed: %v %v", nodes, errs)
	}
	own, _ := ParseOffsets("s@0-2")
	keep, err := cq.Share(own)
	if err != nil {
		t.Fatal(err)
	}
	if keep.String() != "s@0-2" {
		t.Errorf("the coordinator keeps %q, want s@0-2", keep)
	}
	cq.OwnPartRead()
	select {
	case <-a.ended:
		t.Fatal("a member's body ended before its turn")
	case <-time.After(100 * time.Millisecond):
	}
	var out strings.Builder
	n, late, left, err := cq.Merge(ctx, 0, 0, false, nil, func(an *Answer, rest int) (int, error) {
		return CopyLines(&out, an, rest)
	})
	if err != nil || left || len(late) > 0 {
		t.Fatalf("merge: %v (left %v, late %v)", err, left, late)
	}
	if a.share != "s@2-6" || b.share != "s@6-9" {
		t.Errorf("shares %q and %q, want s@2-6 and s@6-9", a.share, b.share)
	}
	var offs []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		offs = append(offs, line[strings.LastIndex(line, ":")+1:len(line)-1])
	}
	if got := strings.Join(offs, ","); n != 7 || got != "2,3,4,5,6,7,8" {
		t.Errorf("merged %d rows, offsets %s; want 7: 2,3,4,5,6,7,8", n, got)
	}
}

// TestQueryMergeLimitAndPartial: the limit counts the coordinator's own
// rows and stops the merge; a member that dies mid-answer fails the merge
// unless the query is partial, which names it among the late.
func TestQueryMergeLimitAndPartial(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := func(limit int, partial bool, ms ...*member) (int, []*NodeError, error) {
		cq := openQuery(ctx, startMembers(t, ms...))
		defer cq.Close()
		if _, err := cq.Share(Offsets{}); err != nil {
			t.Fatal(err)
		}
		cq.OwnPartRead()
		n, late, _, err := cq.Merge(ctx, 2, limit, partial, nil, func(an *Answer, rest int) (int, error) {
			return CopyLines(io.Discard, an, rest)
		})
		return n, late, err
	}
	if n, _, err := run(6, false, &member{held: "s@0-3"}, &member{held: "s@3-9"}); err != nil || n != 6 {
		t.Errorf("limit 6 with 2 own rows: %d rows, %v; want 6", n, err)
	}
	if _, _, err := run(0, false, &member{held: "s@0-3", cut: 1}, &member{held: "s@3-9"}); err == nil {
		t.Error("a member that died mid-answer did not fail the query")
	}
	n, late, err := run(0, true, &member{held: "s@0-3", cut: 1}, &member{held: "s@3-9"})
	var ne *NodeError
	// The dead member's row may or may not have left its buffer.
	if err != nil || len(late) != 1 || !errors.As(late[0], &ne) || n < 2+6 || n > 2+1+6 {
		t.Errorf("partial: %d rows, late %v, %v; want 8 or 9 rows and the first member late", n, late, err)
	}
}
