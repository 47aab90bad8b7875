// Package leases is the bookkeeping of read leases across a cluster's
// nodes (docs/cluster.md, "Read leases"): read leases make a query that an
// engine splits into separate requests (Trino's connector: one split per
// node, read at moments Trino picks) exact while nodes commit: the cut a
// cluster query makes within one request, spread over many.
//
// A client asks one node, the coordinator, to open a lease on a table
// (Open). The coordinator has every member hold its cold tier (PUT
// .../leases/{id}/hold on each, which the member answers with Hold: no
// commit and no local step of a run until it ends) and answers with the
// splits: one per member, tier "hot" (its store's rows the Iceberg table
// lacks), the coordinator's own tier "all" (the Iceberg table's rows too).
// A query with lease=ID reads under the node's hold (Read). While every
// node holds, no node commits, so the Iceberg table the coordinator's
// split reads holds exactly what every node's hot split leaves out,
// whenever each is read.
//
// A keyed table's lease hands out one split instead (Open's merged, tier
// "cluster", on the coordinator): a table with a primary key has one row
// per key, and a key whose changes reached two nodes' stores has a row in
// each, so the splits' rows must be merged by key before an engine sees
// them. The coordinator reads every node's part (Parts) under the same
// holds and merges them; the cut is the same as the per-node splits'.
//
// The lease ends when its splits have been read (Done once per split),
// when the client ends it (End), or when its TTL fires, on the coordinator
// and on every member (each member's own timer ends its hold even when the
// coordinator is gone). A read under a lease that has ended fails: an
// engine's query fails rather than returning rows read outside the cut.
//
// The server owns the routes, their bodies and what a hold does to its
// tables (Holder); this package owns which leases live on the node, their
// timers, the bound per client and the requests between the nodes.
package leases

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sluicedb/sluice/cluster"
)

var (
	// ErrTooMany: the client has its most leases open on the node.
	ErrTooMany = errors.New("too many open read leases")
	// ErrEnded ends the reads of a lease whose TTL fired or that was
	// ended while they ran.
	ErrEnded = errors.New("read lease ended")
	// ErrHeld: a node was asked twice to hold for one lease.
	ErrHeld = errors.New("held already")
)

// Request is the body of opening a lease and of a member's hold.
type Request struct {
	// TTL is a Go duration ("5m"); "" is the server's default.
	TTL string `json:"ttl,omitempty"`
}

// Lease is the coordinator's answer: the lease and the splits to read
// under it (a query with lease=ID and the split's tier, on its node).
type Lease struct {
	ID     string  `json:"id"`
	TTL    string  `json:"ttl"`
	Splits []Split `json:"splits"`
}

// TierCluster is the tier of a merged lease's one split: every node's part
// read by the coordinator and merged by key.
const TierCluster = "cluster"

// Split is one node's part. Node "" is the coordinator itself when it is
// not in its member list (no cluster config), and a merged lease's one
// split: the URL the client asked.
type Split struct {
	Node string `json:"node"`
	Tier string `json:"tier"`
}

// Holder is what a hold does on this node: hold table's cold tier (no
// commit until release) and report the source offsets its store's rows
// hold (nil when they carry none): a split may read any of them, whatever
// its filters.
type Holder interface {
	Hold(ctx context.Context, table string) (release func(), held cluster.Offsets, err error)
}

// Config is what a node's Table needs of it.
type Config struct {
	// Node is this node's id: the coordinator finds itself among its
	// members by the id each hold answers with.
	Node string
	// Members are the nodes a lease holds on; nil: this node alone.
	Members cluster.Members
	// Fanout's Client (the member transport) sends the requests to
	// members and its NodeTimeout bounds each; read at each use.
	Fanout *cluster.Fanout
	// MaxPerClient bounds the leases one client has open on the node that
	// coordinates them: every lease stops every node's commits while it
	// lives.
	MaxPerClient int
	Holder       Holder
	Log          *slog.Logger
	// AfterReserve, when set, runs on a coordinator between counting a
	// lease against its client's bound and opening it (a test's hook).
	AfterReserve func()
}

// Table is a node's leases: those it holds its tier for (held, as a
// member, the coordinator included) and those it coordinates.
type Table struct {
	cfg         Config
	mu          sync.Mutex
	held        map[string]*heldLease
	coordinated map[string]*clusterLease
	// opening counts each client's leases being opened (not yet in
	// coordinated), so that concurrent opens cannot pass the bound.
	opening map[string]int
}

// New is a node's empty lease table.
func New(cfg Config) *Table {
	return &Table{cfg: cfg, held: map[string]*heldLease{}, coordinated: map[string]*clusterLease{}, opening: map[string]int{}}
}

// heldLease is this node's hold of a table's cold tier for a lease.
type heldLease struct {
	table   string
	ttl     time.Duration
	release func()
	// ctx ends when the lease ends: the reads under it stop before the
	// hold is released, so no row is read outside the cut.
	ctx     context.Context
	cancel  context.CancelCauseFunc
	readers sync.WaitGroup
	timer   *time.Timer
	// keep is this node's share of the source offsets: its reads leave
	// out the stream rows of every other offset. Set by the coordinator
	// before it hands out the splits; nil until then.
	keep cluster.Offsets
}

// clusterLease is a lease this node coordinates.
type clusterLease struct {
	table   string
	client  string // who opened it
	lease   Lease
	parts   []Split  // every node's part (lease.Splits, unless merged)
	members []string // every member asked to hold (each is told when it ends)
	uses    int      // splits not yet reported read
	timer   *time.Timer
}

func leaseKey(table, id string) string { return table + "\x00" + id }

func (t *Table) nodeTimeout() time.Duration {
	if d := t.cfg.Fanout.NodeTimeout; d > 0 {
		return d
	}
	return cluster.DefaultNodeTimeout
}

// reserve counts a lease being opened by client against its bound; the
// caller calls the returned release once the lease is in coordinated or
// failed to open.
func (t *Table) reserve(client string) (release func(), err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	open := t.opening[client]
	for _, cl := range t.coordinated {
		if cl.client == client {
			open++
		}
	}
	if open >= t.cfg.MaxPerClient {
		return nil, fmt.Errorf("%w: client %s has %d open on this node, the most one client may (MaxLeasesPerClient); end one (DELETE) or let its TTL end it", ErrTooMany, client, open)
	}
	t.opening[client]++
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.opening[client]--; t.opening[client] == 0 {
			delete(t.opening, client)
		}
	}, nil
}

// Hold holds table's tier for lease id until ttl or Unhold, and returns
// the source offsets its store's rows hold: a member's part of opening a
// lease (the coordinator's own too).
func (t *Table) Hold(ctx context.Context, table, id string, ttl time.Duration) (cluster.Offsets, error) {
	release, held, err := t.cfg.Holder.Hold(ctx, table)
	if err != nil {
		return nil, err
	}
	hl := &heldLease{table: table, ttl: ttl, release: release}
	hl.ctx, hl.cancel = context.WithCancelCause(context.Background())
	key := leaseKey(table, id)
	t.mu.Lock()
	if _, dup := t.held[key]; dup {
		t.mu.Unlock()
		release()
		return nil, fmt.Errorf("lease %s is %w", id, ErrHeld)
	}
	t.held[key] = hl
	t.mu.Unlock()
	hl.timer = time.AfterFunc(ttl, func() {
		if t.Unhold(table, id, EndCause(id, ttl.String())) {
			t.cfg.Log.Warn("read lease expired on this member: its reads end with an error", "table", table, "lease", id, "ttl", ttl)
		}
	})
	return held, nil
}

// Share sets the offsets lease id's reads on this node answer for; false
// when the lease is not held here.
func (t *Table) Share(table, id string, keep cluster.Offsets) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	hl := t.held[leaseKey(table, id)]
	if hl != nil {
		hl.keep = keep
	}
	return hl != nil
}

// Unhold ends a held lease: its reads stop with cause, then the tier is
// released. It reports whether the lease was held.
func (t *Table) Unhold(table, id string, cause error) bool {
	key := leaseKey(table, id)
	t.mu.Lock()
	hl := t.held[key]
	if hl != nil {
		delete(t.held, key)
	}
	t.mu.Unlock()
	if hl == nil {
		return false
	}
	hl.timer.Stop()
	hl.cancel(cause)
	hl.readers.Wait()
	hl.release()
	return true
}

// EndAll releases every hold (at shutdown: the cold tiers close).
func (t *Table) EndAll() {
	t.mu.Lock()
	var keys [][2]string
	for k := range t.held {
		table, id, _ := strings.Cut(k, "\x00")
		keys = append(keys, [2]string{table, id})
	}
	t.mu.Unlock()
	for _, k := range keys {
		t.Unhold(k[0], k[1], fmt.Errorf("%w: the node shuts down", ErrEnded))
	}
}

// EndCause is why the reads of lease id end: its TTL (ttl, when the
// coordinator's timer fired) or an end the client asked for.
func EndCause(id, ttl string) error {
	if ttl != "" {
		return fmt.Errorf("%w: lease %s expired after its TTL of %s", ErrEnded, id, ttl)
	}
	return fmt.Errorf("%w: lease %s was ended", ErrEnded, id)
}

// Gone says that lease id of table is not held here, and what to do.
func Gone(table, id string) string {
	return fmt.Sprintf("lease %s of table %s is not held here: it expired after its TTL, was ended, or never existed; "+
		"a read outside it could repeat or miss rows, so run the statement again", id, table)
}

// HoldAnswer is a member's answer to a hold: its node id (the coordinator
// finds itself by it) and the source offsets its store holds.
type HoldAnswer struct {
	Node    string `json:"node"`
	Offsets string `json:"offsets,omitempty"`
}

// Open opens lease id on table as its coordinator for client (the unit of
// MaxPerClient): every member holds, or none does and the error names the
// nodes that failed. ErrTooMany when client has its most open. A merged
// lease answers one split of tier TierCluster on this node, whose read
// takes every node's part (Parts).
func (t *Table) Open(ctx context.Context, table, client, id string, ttl time.Duration, merged bool) (Lease, error) {
	release, err := t.reserve(client)
	if err != nil {
		return Lease{}, err
	}
	defer release()
	if t.cfg.AfterReserve != nil {
		t.cfg.AfterReserve()
	}
	var nodes []string
	if t.cfg.Members != nil {
		if nodes, err = t.cfg.Members.Members(ctx); err != nil {
			return Lease{}, err
		}
	}
	cl := &clusterLease{table: table, client: client, members: nodes, lease: Lease{ID: id, TTL: ttl.String()}}
	body, _ := json.Marshal(Request{TTL: ttl.String()})
	// Every member at once; each waits at most the node timeout for its
	// hold (two leases or cluster queries and two waiting commits can wait
	// on each other, docs/cluster.md).
	ctx, cancel := context.WithTimeout(ctx, t.nodeTimeout())
	defer cancel()
	type held struct {
		answer HoldAnswer
		err    error
	}
	results := make([]held, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Go(func() {
			results[i].answer, results[i].err = t.holdOn(ctx, node, table, id, body)
		})
	}
	wg.Wait()
	var errs []error
	self := false
	// Each message once: every split's node reports the source offsets
	// its store holds, each is given to one of them (the coordinator's
	// first), and each split reads only its share.
	var offsets []cluster.Offsets
	var sharers []string // their nodes, "" for this node's own hold
	for i, res := range results {
		if res.err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", nodes[i], res.err))
			continue
		}
		o, err := cluster.ParseOffsets(res.answer.Offsets)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", nodes[i], err))
			continue
		}
		tier := "hot"
		if res.answer.Node == t.cfg.Node {
			tier, self = "all", true
			offsets, sharers = append([]cluster.Offsets{o}, offsets...), append([]string{nodes[i]}, sharers...)
		} else {
			offsets, sharers = append(offsets, o), append(sharers, nodes[i])
		}
		cl.lease.Splits = append(cl.lease.Splits, Split{Node: nodes[i], Tier: tier})
	}
	if len(errs) == 0 && !self {
		// Not in its own member list (or no cluster config): hold here.
		if o, err := t.Hold(ctx, table, id, ttl); err != nil {
			errs = append(errs, fmt.Errorf("this node: %w", err))
		} else {
			cl.lease.Splits = append(cl.lease.Splits, Split{Node: "", Tier: "all"})
			offsets, sharers = append([]cluster.Offsets{o}, offsets...), append([]string{""}, sharers...)
		}
	}
	if len(errs) == 0 {
		errs = t.share(ctx, table, id, sharers, cluster.Assign(offsets))
	}
	if len(errs) > 0 {
		t.end(cl, id, "")
		return Lease{}, errors.Join(errs...)
	}
	cl.parts = cl.lease.Splits
	if merged {
		cl.lease.Splits = []Split{{Node: "", Tier: TierCluster}}
	}
	cl.uses = len(cl.lease.Splits)
	t.mu.Lock()
	t.coordinated[leaseKey(table, id)] = cl
	t.mu.Unlock()
	cl.timer = time.AfterFunc(ttl, func() {
		t.cfg.Log.Warn("read lease expired: its reads end with an error", "table", table, "lease", id, "ttl", ttl)
		t.endCoordinated(table, id, ttl.String())
	})
	return cl.lease, nil
}

// holdOn asks node to hold for the lease.
func (t *Table) holdOn(ctx context.Context, node, table, id string, body []byte) (HoldAnswer, error) {
	var answer HoldAnswer
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, leaseURL(node, table, id)+"/hold", bytes.NewReader(body))
	if err != nil {
		return answer, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.cfg.Fanout.Client.Do(req)
	if err != nil {
		return answer, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != http.StatusOK {
		return answer, fmt.Errorf("hold: %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, &answer); err != nil {
		return answer, fmt.Errorf("hold: %w", err)
	}
	return answer, nil
}

// share gives each node of a lease its share (keep[i] to nodes[i];
// node "" is this node's own hold), every node at once.
func (t *Table) share(ctx context.Context, table, id string, nodes []string, keep []cluster.Offsets) []error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		if node == "" {
			if !t.Share(table, id, keep[i]) {
				errs[i] = fmt.Errorf("this node: %s", Gone(table, id))
			}
			continue
		}
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPut, leaseURL(node, table, id)+"/share",
				strings.NewReader(keep[i].String()))
			if err != nil {
				errs[i] = err
				return
			}
			resp, err := t.cfg.Fanout.Client.Do(req)
			if err != nil {
				errs[i] = fmt.Errorf("node %s: share: %w", node, err)
				return
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				errs[i] = fmt.Errorf("node %s: share: %s: %s", node, resp.Status, bytes.TrimSpace(b))
			}
		})
	}
	wg.Wait()
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

func leaseURL(node, table, id string) string {
	return node + "/v1/tables/" + url.PathEscape(table) + "/leases/" + url.PathEscape(id)
}

// end tells every member of cl to stop holding (those that never held
// answer 204 all the same) and ends this node's own hold; ttl is the
// lease's TTL when it expired, for the reads' error.
func (t *Table) end(cl *clusterLease, id, ttl string) {
	ctx, cancel := context.WithTimeout(context.Background(), t.nodeTimeout())
	defer cancel()
	var wg sync.WaitGroup
	for _, node := range cl.members {
		wg.Go(func() {
			target := leaseURL(node, cl.table, id) + "/hold"
			if ttl != "" {
				target += "?ttl=" + url.QueryEscape(ttl)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodDelete, target, nil)
			if err == nil {
				var resp *http.Response
				if resp, err = t.cfg.Fanout.Client.Do(req); err == nil {
					resp.Body.Close()
				}
			}
			if err != nil {
				// Its own TTL ends its hold.
				t.cfg.Log.Warn("read lease: a member was not told the lease ended", "table", cl.table, "lease", id, "node", node, "error", err)
			}
		})
	}
	wg.Wait()
	t.Unhold(cl.table, id, EndCause(id, ttl))
}

// endCoordinated ends a lease this node coordinates, once; ttl is set
// when it expired.
func (t *Table) endCoordinated(table, id, ttl string) bool {
	key := leaseKey(table, id)
	t.mu.Lock()
	cl := t.coordinated[key]
	delete(t.coordinated, key)
	t.mu.Unlock()
	if cl == nil {
		return false
	}
	cl.timer.Stop()
	t.end(cl, id, ttl)
	return true
}

// Done counts one split of a lease this node coordinates read; the last
// ends the lease. False when the lease is not coordinated here.
func (t *Table) Done(table, id string) bool {
	t.mu.Lock()
	cl := t.coordinated[leaseKey(table, id)]
	last := false
	if cl != nil {
		cl.uses--
		last = cl.uses <= 0
	}
	t.mu.Unlock()
	if cl == nil {
		return false
	}
	if last {
		t.endCoordinated(table, id, "")
	}
	return true
}

// Splits adds uses for one more scan of the table under the same lease (a
// self-join: a second lease could wait behind a commit that waits behind
// the first) and returns the splits again. False when the lease is not
// coordinated here.
func (t *Table) Splits(table, id string) (Lease, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cl := t.coordinated[leaseKey(table, id)]
	if cl == nil {
		return Lease{}, false
	}
	cl.uses += len(cl.lease.Splits)
	return cl.lease, true
}

// Parts are every node's part of a lease this node coordinates (for a
// merged lease, what its one split reads); false when it is not
// coordinated here.
func (t *Table) Parts(table, id string) ([]Split, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cl := t.coordinated[leaseKey(table, id)]
	if cl == nil {
		return nil, false
	}
	return cl.parts, true
}

// End ends a lease now (the engine's query is over): on every node when
// this one coordinates it, otherwise this node's hold.
func (t *Table) End(table, id string) {
	if !t.endCoordinated(table, id, "") {
		t.Unhold(table, id, EndCause(id, ""))
	}
}

// Read is a read under a lease's hold on this node.
type Read struct {
	// Ended is done when the lease ends; its cause (ErrEnded) is why.
	Ended context.Context
	// Keep is this node's share of the source offsets (nil: all).
	Keep cluster.Offsets
	hl   *heldLease
}

// Close ends the read; the lease's hold is released only once every read
// under it is closed.
func (r *Read) Close() { r.hl.readers.Done() }

// Read starts a read under lease id of table; false when it is not held
// here.
func (t *Table) Read(table, id string) (*Read, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	hl := t.held[leaseKey(table, id)]
	if hl == nil {
		return nil, false
	}
	hl.readers.Add(1)
	return &Read{Ended: hl.ctx, Keep: hl.keep, hl: hl}, true
}
