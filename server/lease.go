package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/cluster"
	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/rowformat"
	"github.com/sluicedb/sluice/table"
)

// Read leases make a query that an engine splits into separate requests
// (Trino's connector: one split per node, read at moments Trino picks)
// exact while nodes commit: the cut a cluster query makes within one
// request, spread over many (docs/cluster.md, "Read leases").
//
// A client asks one node, the coordinator, to open a lease on a table
// (POST /v1/tables/{t}/leases). The coordinator has every member hold its
// cold tier (PUT .../leases/{id}/hold: coldapi.Tier.Hold, no commit and no
// local step of a run until it ends) and answers with the splits: one per
// member, tier "hot" (its store's rows the Iceberg table lacks), the
// coordinator's own tier "all" (the Iceberg table's rows too). A query
// with lease=ID reads under the node's hold. While every node holds, no
// node commits, so the Iceberg table the coordinator's split reads holds
// exactly what every node's hot split leaves out, whenever each is read.
//
// The lease ends when its splits have been read (POST .../done once per
// split), when the client ends it (DELETE), or when its TTL fires, on
// the coordinator and on every member (each member's own timer ends its
// hold even when the coordinator is gone). A read under a lease that has
// ended fails (410, or its stream ends with an error): an engine's query
// fails rather than returning rows read outside the cut.

const (
	// DefaultLeaseTTL is a lease's TTL when the client names none.
	DefaultLeaseTTL = 5 * time.Minute
	// MaxLeaseTTL bounds a lease's TTL: while a lease lives no node
	// commits, and a waiting commit makes every other query of the node
	// wait too. It is config's, since the orphan_age floor counts it.
	MaxLeaseTTL = config.MaxLeaseTTL
	// MaxLeasesPerClient bounds the leases one client has open on the
	// node that coordinates them: every lease stops every node's commits
	// while it lives, so no one client may hold them without bound. An
	// engine opens one per query it reads (Trino: one per table scan).
	MaxLeasesPerClient = 8
)

// errTooManyLeases: the client has MaxLeasesPerClient leases open (429).
var errTooManyLeases = errors.New("too many open read leases")

// errLeaseEnded ends the reads of a lease whose TTL fired or that was
// ended while they ran.
var errLeaseEnded = errors.New("read lease ended")

// LeaseRequest is the body of POST /v1/tables/{t}/leases and of a
// member's PUT .../leases/{id}/hold.
type LeaseRequest struct {
	// TTL is a Go duration ("5m"); "" is DefaultLeaseTTL.
	TTL string `json:"ttl,omitempty"`
}

// Lease is the coordinator's answer: the lease and the splits to read
// under it (a query with lease=ID and the split's tier, on its node).
type Lease struct {
	ID     string       `json:"id"`
	TTL    string       `json:"ttl"`
	Splits []LeaseSplit `json:"splits"`
}

// LeaseSplit is one node's part. Node "" is the coordinator itself when
// it is not in its member list (no cluster config): the URL the client
// asked.
type LeaseSplit struct {
	Node string `json:"node"`
	Tier string `json:"tier"`
}

// leaseTable is a node's leases: those it holds its tier for (held, as a
// member, the coordinator included) and those it coordinates.
type leaseTable struct {
	mu          sync.Mutex
	held        map[string]*heldLease
	coordinated map[string]*clusterLease
	// opening counts each client's leases being opened (not yet in
	// coordinated), so that concurrent opens cannot pass the bound.
	opening map[string]int
}

// clientOf names who sent r, the unit of MaxLeasesPerClient: the
// authenticated principal when auth is on (clients behind one proxy share
// an address, and one client may come from many), the remote IP address
// otherwise.
func clientOf(r *http.Request) string {
	if p := principalOf(r); p != nil {
		return p.Name
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// afterLeaseReserve, when a test sets it, runs on a lease's coordinator
// between counting the lease against its client's bound and opening it:
// openers held there are all being opened at once.
var afterLeaseReserve atomic.Pointer[func()]

// reserve counts a lease being opened by client against its bound; the
// caller calls the returned release once the lease is in coordinated or
// failed to open.
func (lt *leaseTable) reserve(client string) (release func(), err error) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	open := lt.opening[client]
	for _, cl := range lt.coordinated {
		if cl.client == client {
			open++
		}
	}
	if open >= MaxLeasesPerClient {
		return nil, fmt.Errorf("%w: client %s has %d open on this node, the most one client may (MaxLeasesPerClient); end one (DELETE) or let its TTL end it", errTooManyLeases, client, open)
	}
	if lt.opening == nil {
		lt.opening = map[string]int{}
	}
	lt.opening[client]++
	return func() {
		lt.mu.Lock()
		defer lt.mu.Unlock()
		if lt.opening[client]--; lt.opening[client] == 0 {
			delete(lt.opening, client)
		}
	}, nil
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
	// keep is this node's share of the source offsets (overlap.go): its
	// reads leave out the stream rows of every other offset. Set by the
	// coordinator before it hands out the splits; nil until then.
	keep cluster.Offsets
}

// clusterLease is a lease this node coordinates.
type clusterLease struct {
	table   string
	client  string // who opened it (clientOf)
	lease   Lease
	members []string // every member asked to hold (each is told when it ends)
	local   bool     // this node holds outside its member list
	uses    int      // splits not yet reported read
	timer   *time.Timer
}

func leaseKey(table, id string) string { return table + "\x00" + id }

func parseLeaseTTL(s string) (time.Duration, error) {
	if s == "" {
		return DefaultLeaseTTL, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > MaxLeaseTTL {
		return 0, fmt.Errorf("%w: lease ttl %q: want a duration above 0 and at most %v", errBadQuery, s, MaxLeaseTTL)
	}
	return d, nil
}

// decodeLeaseRequest reads an optional LeaseRequest body.
func decodeLeaseRequest(r *http.Request) (time.Duration, error) {
	var req LeaseRequest
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 64<<10))
	if err != nil {
		return 0, fmt.Errorf("%w: body: %v", errBadQuery, err)
	}
	if len(bytes.TrimSpace(body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return 0, fmt.Errorf("%w: body: %v", errBadQuery, err)
		}
	}
	return parseLeaseTTL(req.TTL)
}

// hold holds ts's tier for lease id until ttl or unhold, and returns the
// source offsets its store's rows hold (heldOffsets; nil when they carry
// none): a split may read any of them, whatever its filters.
func (s *Server) hold(ctx context.Context, ts *tableState, id string, ttl time.Duration) (cluster.Offsets, error) {
	release, err := s.holdTier(ctx, ts)
	if err != nil {
		return nil, err
	}
	held, err := s.heldOffsets(ctx, ts, table.Query{})
	if err != nil {
		release()
		return nil, err
	}
	hl := &heldLease{table: ts.cfg.Name, ttl: ttl, release: release}
	hl.ctx, hl.cancel = context.WithCancelCause(context.Background())
	key := leaseKey(ts.cfg.Name, id)
	s.leases.mu.Lock()
	if s.leases.held == nil {
		s.leases.held = map[string]*heldLease{}
	}
	if _, dup := s.leases.held[key]; dup {
		s.leases.mu.Unlock()
		release()
		return nil, fmt.Errorf("%w: lease %s is held already", errBadQuery, id)
	}
	s.leases.held[key] = hl
	s.leases.mu.Unlock()
	hl.timer = time.AfterFunc(ttl, func() {
		if s.unhold(ts.cfg.Name, id, leaseEndCause(id, ttl.String())) {
			s.log.Warn("read lease expired on this member: its reads end with an error", "table", ts.cfg.Name, "lease", id, "ttl", ttl)
		}
	})
	return held, nil
}

// share sets the offsets lease id's reads on this node answer for.
func (s *Server) share(table, id string, keep cluster.Offsets) bool {
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	hl := s.leases.held[leaseKey(table, id)]
	if hl != nil {
		hl.keep = keep
	}
	return hl != nil
}

// handleLeaseShare is a member's share of the source offsets, from the
// lease's coordinator once every node holds (text: cluster.Offsets).
func (s *Server) handleLeaseShare(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 16<<20))
	var keep cluster.Offsets
	if err == nil {
		keep, err = cluster.ParseOffsets(string(b))
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "lease share: "+err.Error())
		return
	}
	if !s.share(r.PathValue("table"), r.PathValue("id"), keep) {
		writeError(w, http.StatusGone, leaseGone(r.PathValue("table"), r.PathValue("id")))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// unhold ends a held lease: its reads stop with cause, then the tier is
// released. It reports whether the lease was held.
func (s *Server) unhold(table, id string, cause error) bool {
	key := leaseKey(table, id)
	s.leases.mu.Lock()
	hl := s.leases.held[key]
	if hl != nil {
		delete(s.leases.held, key)
	}
	s.leases.mu.Unlock()
	if hl == nil {
		return false
	}
	hl.timer.Stop()
	hl.cancel(cause)
	hl.readers.Wait()
	hl.release()
	return true
}

// endAllLeases releases every hold (at shutdown: the cold tiers close).
func (s *Server) endAllLeases() {
	s.leases.mu.Lock()
	var keys [][2]string
	for k := range s.leases.held {
		table, id, _ := strings.Cut(k, "\x00")
		keys = append(keys, [2]string{table, id})
	}
	s.leases.mu.Unlock()
	for _, k := range keys {
		s.unhold(k[0], k[1], fmt.Errorf("%w: the node shuts down", errLeaseEnded))
	}
}

// handleLeaseHold is a member's part of opening a lease: hold the tier,
// then answer with this node's id (the coordinator finds itself by it).
func (s *Server) handleLeaseHold(w http.ResponseWriter, r *http.Request) {
	ts, ok := s.tables[r.PathValue("table")]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown table %q", r.PathValue("table")))
		return
	}
	ttl, err := decodeLeaseRequest(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// The coordinator gives up after its node timeout (its request's
	// context then ends this wait).
	held, err := s.hold(r.Context(), ts, r.PathValue("id"), ttl)
	if err != nil {
		writeError(w, queryErrorCode(err), "lease: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, holdAnswer{Node: s.nodeID, Offsets: held.String()})
}

func (s *Server) handleLeaseUnhold(w http.ResponseWriter, r *http.Request) {
	s.unhold(r.PathValue("table"), r.PathValue("id"), leaseEndCause(r.PathValue("id"), r.URL.Query().Get("ttl")))
	w.WriteHeader(http.StatusNoContent)
}

// leaseEndCause is why the reads of lease id end: its TTL (ttl, when the
// coordinator's timer fired) or an end the client asked for.
func leaseEndCause(id, ttl string) error {
	if ttl != "" {
		return fmt.Errorf("%w: lease %s expired after its TTL of %s", errLeaseEnded, id, ttl)
	}
	return fmt.Errorf("%w: lease %s was ended", errLeaseEnded, id)
}

// handleLeaseOpen opens a lease as its coordinator: every member holds,
// or none does and the answer names the nodes that failed.
func (s *Server) handleLeaseOpen(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("table")
	ts, ok := s.tables[name]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown table %q", name))
		return
	}
	ttl, err := decodeLeaseRequest(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	client := clientOf(r)
	release, err := s.leases.reserve(client)
	if err != nil {
		writeError(w, http.StatusTooManyRequests, "lease: "+err.Error())
		return
	}
	defer release()
	if hook := afterLeaseReserve.Load(); hook != nil {
		(*hook)()
	}
	var nodes []string
	if s.members != nil {
		if nodes, err = s.members.Members(r.Context()); err != nil {
			writeError(w, http.StatusBadGateway, "lease: "+err.Error())
			return
		}
	}
	id := newNodeID()
	cl := &clusterLease{table: name, client: client, members: nodes, lease: Lease{ID: id, TTL: ttl.String()}}
	body, _ := json.Marshal(LeaseRequest{TTL: ttl.String()})
	timeout := s.fanout.NodeTimeout
	if timeout <= 0 {
		timeout = cluster.DefaultNodeTimeout
	}
	// Every member at once; each waits at most the node timeout for its
	// hold (two leases or cluster queries and two waiting commits can wait
	// on each other, docs/cluster.md).
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	type held struct {
		answer holdAnswer
		err    error
	}
	results := make([]held, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Go(func() {
			results[i].answer, results[i].err = s.holdOn(ctx, node, name, id, body)
		})
	}
	wg.Wait()
	var errs []error
	self := false
	// Each message once: every split's node reports the source offsets
	// its store holds, each is given to one of them (the coordinator's
	// first), and each split reads only its share (overlap.go).
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
		if res.answer.Node == s.nodeID {
			tier, self = "all", true
			offsets, sharers = append([]cluster.Offsets{o}, offsets...), append([]string{nodes[i]}, sharers...)
		} else {
			offsets, sharers = append(offsets, o), append(sharers, nodes[i])
		}
		cl.lease.Splits = append(cl.lease.Splits, LeaseSplit{Node: nodes[i], Tier: tier})
	}
	if len(errs) == 0 && !self {
		// Not in its own member list (or no cluster config): hold here.
		if o, err := s.hold(ctx, ts, id, ttl); err != nil {
			errs = append(errs, fmt.Errorf("this node: %w", err))
		} else {
			cl.local = true
			cl.lease.Splits = append(cl.lease.Splits, LeaseSplit{Node: "", Tier: "all"})
			offsets, sharers = append([]cluster.Offsets{o}, offsets...), append([]string{""}, sharers...)
		}
	}
	if len(errs) == 0 {
		errs = s.shareLease(ctx, name, id, sharers, cluster.Assign(offsets))
	}
	if len(errs) > 0 {
		s.endLease(cl, id, "")
		writeError(w, http.StatusBadGateway, "lease: "+errors.Join(errs...).Error())
		return
	}
	cl.uses = len(cl.lease.Splits)
	s.leases.mu.Lock()
	if s.leases.coordinated == nil {
		s.leases.coordinated = map[string]*clusterLease{}
	}
	s.leases.coordinated[leaseKey(name, id)] = cl
	s.leases.mu.Unlock()
	cl.timer = time.AfterFunc(ttl, func() {
		s.log.Warn("read lease expired: its reads end with an error", "table", name, "lease", id, "ttl", ttl)
		s.endCoordinated(name, id, ttl.String())
	})
	writeJSON(w, http.StatusOK, cl.lease)
}

// holdAnswer is a member's answer to a hold: its node id (the coordinator
// finds itself by it) and the source offsets its store holds.
type holdAnswer struct {
	Node    string `json:"node"`
	Offsets string `json:"offsets,omitempty"`
}

// holdOn asks node to hold for the lease.
func (s *Server) holdOn(ctx context.Context, node, table, id string, body []byte) (holdAnswer, error) {
	var answer holdAnswer
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, leaseURL(node, table, id)+"/hold", bytes.NewReader(body))
	if err != nil {
		return answer, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.leaseClient().Do(req)
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

// shareLease gives each node of a lease its share (keep[i] to nodes[i];
// node "" is this node's own hold), every node at once.
func (s *Server) shareLease(ctx context.Context, table, id string, nodes []string, keep []cluster.Offsets) []error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		if node == "" {
			if !s.share(table, id, keep[i]) {
				errs[i] = fmt.Errorf("this node: %s", leaseGone(table, id))
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
			resp, err := s.leaseClient().Do(req)
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

// leaseClient sends the holds to members, through the member transport.
func (s *Server) leaseClient() *http.Client { return s.fanout.Client }

func leaseURL(node, table, id string) string {
	return node + "/v1/tables/" + url.PathEscape(table) + "/leases/" + url.PathEscape(id)
}

// endLease tells every member of cl to stop holding (those that never
// held answer 204 all the same) and ends this node's own hold; ttl is the
// lease's TTL when it expired, for the reads' error.
func (s *Server) endLease(cl *clusterLease, id, ttl string) {
	timeout := s.fanout.NodeTimeout
	if timeout <= 0 {
		timeout = cluster.DefaultNodeTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
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
				if resp, err = s.leaseClient().Do(req); err == nil {
					resp.Body.Close()
				}
			}
			if err != nil {
				// Its own TTL ends its hold.
				s.log.Warn("read lease: a member was not told the lease ended", "table", cl.table, "lease", id, "node", node, "error", err)
			}
		})
	}
	wg.Wait()
	s.unhold(cl.table, id, leaseEndCause(id, ttl))
}

// endCoordinated ends a lease this node coordinates, once; ttl is set
// when it expired.
func (s *Server) endCoordinated(table, id, ttl string) bool {
	key := leaseKey(table, id)
	s.leases.mu.Lock()
	cl := s.leases.coordinated[key]
	delete(s.leases.coordinated, key)
	s.leases.mu.Unlock()
	if cl == nil {
		return false
	}
	cl.timer.Stop()
	s.endLease(cl, id, ttl)
	return true
}

// handleLeaseDone counts one split read; the last ends the lease.
func (s *Server) handleLeaseDone(w http.ResponseWriter, r *http.Request) {
	table, id := r.PathValue("table"), r.PathValue("id")
	s.leases.mu.Lock()
	cl := s.leases.coordinated[leaseKey(table, id)]
	last := false
	if cl != nil {
		cl.uses--
		last = cl.uses <= 0
	}
	s.leases.mu.Unlock()
	if cl == nil {
		writeError(w, http.StatusGone, leaseGone(table, id))
		return
	}
	if last {
		s.endCoordinated(table, id, "")
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleLeaseSplits adds uses for one more scan of the table under the
// same lease (a self-join: a second lease could wait behind a commit that
// waits behind the first) and answers with the splits again.
func (s *Server) handleLeaseSplits(w http.ResponseWriter, r *http.Request) {
	table, id := r.PathValue("table"), r.PathValue("id")
	s.leases.mu.Lock()
	cl := s.leases.coordinated[leaseKey(table, id)]
	var lease Lease
	if cl != nil {
		cl.uses += len(cl.lease.Splits)
		lease = cl.lease
	}
	s.leases.mu.Unlock()
	if cl == nil {
		writeError(w, http.StatusGone, leaseGone(table, id))
		return
	}
	writeJSON(w, http.StatusOK, lease)
}

// handleLeaseEnd ends a lease now (the engine's query is over).
func (s *Server) handleLeaseEnd(w http.ResponseWriter, r *http.Request) {
	table, id := r.PathValue("table"), r.PathValue("id")
	if !s.endCoordinated(table, id, "") {
		s.unhold(table, id, leaseEndCause(id, ""))
	}
	w.WriteHeader(http.StatusNoContent)
}

func leaseGone(table, id string) string {
	return fmt.Sprintf("lease %s of table %s is not held here: it expired after its TTL, was ended, or never existed; "+
		"a read outside it could repeat or miss rows, so run the statement again", id, table)
}

// queryUnderLease answers a query with lease=ID: this node's part read
// under the lease's hold. A lease that ends during the read (its TTL)
// ends the answer with an error (an NDJSON error line, or the
// Sluice-Error trailer for Arrow): never rows read after the hold.
func (s *Server) queryUnderLease(ctx context.Context, w http.ResponseWriter, name string, req QueryRequest, format string) {
	key := leaseKey(name, req.Lease)
	s.leases.mu.Lock()
	hl := s.leases.held[key]
	var keep cluster.Offsets
	if hl != nil {
		hl.readers.Add(1)
		keep = hl.keep
	}
	s.leases.mu.Unlock()
	if hl == nil {
		writeError(w, http.StatusGone, leaseGone(name, req.Lease))
		return
	}
	defer hl.readers.Done()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rc := http.NewResponseController(w)
	stop := context.AfterFunc(hl.ctx, func() {
		cancel(context.Cause(hl.ctx))
		// A read blocked on a slow client's window would keep the hold
		// past the TTL: end its writes too, after a moment for the
		// error line.
		_ = rc.SetWriteDeadline(time.Now().Add(time.Second))
	})
	defer stop()
	_, encoded := rowformat.Lookup(format)
	start := func() {
		setContentType(w, format)
		if encoded {
			w.Header().Set("Trailer", cluster.TrailerError)
		}
		w.WriteHeader(http.StatusOK)
	}
	n, err := s.query(ctx, name, req, w, format, start, true, keep)
	if err != nil && context.Cause(ctx) != nil && errors.Is(context.Cause(ctx), errLeaseEnded) {
		err = context.Cause(ctx)
	}
	if err != nil && n < 0 {
		code := queryErrorCode(err)
		if errors.Is(err, errLeaseEnded) {
			code = http.StatusGone
		}
		writeError(w, code, err.Error())
		return
	}
	if err != nil {
		s.log.Warn("query under a lease failed mid-stream", "table", name, "rows", n, "error", err)
		if encoded {
			// The Arrow stream ended cleanly (its end-of-stream marker is
			// out): break the HTTP body as well, so that a client that
			// cannot read trailers (Java's HttpClient: the Trino connector)
			// fails instead of taking a part for the whole.
			w.Header().Set(cluster.TrailerError, err.Error())
			panic(http.ErrAbortHandler)
		}
		endWithError(w, format, err)
	}
}
