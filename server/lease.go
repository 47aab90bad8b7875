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
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/cluster"
	"github.com/sluicedb/sluice/cluster/leases"
	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/rowformat"
	"github.com/sluicedb/sluice/table"
)

// Read leases (docs/cluster.md, "Read leases"): the routes, their bodies
// and what a hold does to this node's tables. Which leases live on the
// node, their timers and the requests between nodes are package
// cluster/leases'.

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

// The lease API's bodies.
type (
	// LeaseRequest is the body of POST /v1/tables/{t}/leases and of a
	// member's PUT .../leases/{id}/hold.
	LeaseRequest = leases.Request
	// Lease is the coordinator's answer: the lease and the splits to
	// read under it.
	Lease = leases.Lease
	// LeaseSplit is one node's part of a lease.
	LeaseSplit = leases.Split
)

// afterLeaseReserve, when a test sets it, runs on a lease's coordinator
// between counting the lease against its client's bound and opening it:
// openers held there are all being opened at once.
var afterLeaseReserve atomic.Pointer[func()]

// newLeases is s's lease table; s's members, fan-out and member transport
// are set.
func (s *Server) newLeases() *leases.Table {
	return leases.New(leases.Config{Node: s.nodeID, Members: s.members, Fanout: s.fanout, MaxPerClient: MaxLeasesPerClient,
		Holder: tierHolder{s}, Log: s.log, AfterReserve: func() {
			if hook := afterLeaseReserve.Load(); hook != nil {
				(*hook)()
			}
		}})
}

// tierHolder is what a lease's hold does on this node: hold the table's
// cold tier (holdTier) and report the source offsets its store's rows
// hold (heldOffsets).
type tierHolder struct{ s *Server }

func (h tierHolder) Hold(ctx context.Context, name string) (func(), cluster.Offsets, error) {
	ts, ok := h.s.tables[name]
	if !ok {
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownTable, name)
	}
	release, err := h.s.holdTier(ctx, ts)
	if err != nil {
		return nil, nil, err
	}
	held, err := h.s.heldOffsets(ctx, ts, table.Query{})
	if err != nil {
		release()
		return nil, nil, err
	}
	return release, held, nil
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
	if !s.leases.Share(r.PathValue("table"), r.PathValue("id"), keep) {
		writeError(w, http.StatusGone, leases.Gone(r.PathValue("table"), r.PathValue("id")))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleLeaseHold is a member's part of opening a lease: hold the tier,
// then answer with this node's id (the coordinator finds itself by it).
func (s *Server) handleLeaseHold(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.tables[r.PathValue("table")]; !ok {
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
	held, err := s.leases.Hold(r.Context(), r.PathValue("table"), r.PathValue("id"), ttl)
	if errors.Is(err, leases.ErrHeld) {
		err = fmt.Errorf("%w: %w", errBadQuery, err)
	}
	if err != nil {
		writeError(w, queryErrorCode(err), "lease: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, leases.HoldAnswer{Node: s.nodeID, Offsets: held.String()})
}

func (s *Server) handleLeaseUnhold(w http.ResponseWriter, r *http.Request) {
	s.leases.Unhold(r.PathValue("table"), r.PathValue("id"), leases.EndCause(r.PathValue("id"), r.URL.Query().Get("ttl")))
	w.WriteHeader(http.StatusNoContent)
}

// handleLeaseOpen opens a lease as its coordinator: every member holds,
// or none does and the answer names the nodes that failed.
func (s *Server) handleLeaseOpen(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("table")
	if _, ok := s.tables[name]; !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown table %q", name))
		return
	}
	ttl, err := decodeLeaseRequest(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// A keyed table's lease has one split, every node's part merged by key
	// on this node (leasemerge.go).
	merged := len(s.tables[name].table.PrimaryKey()) > 0
	lease, err := s.leases.Open(r.Context(), name, clientOf(r), newNodeID(), ttl, merged)
	if errors.Is(err, leases.ErrTooMany) {
		writeError(w, http.StatusTooManyRequests, "lease: "+err.Error())
		return
	}
	if err != nil {
		writeError(w, http.StatusBadGateway, "lease: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, lease)
}

// handleLeaseDone counts one split read; the last ends the lease.
func (s *Server) handleLeaseDone(w http.ResponseWriter, r *http.Request) {
	if !s.leases.Done(r.PathValue("table"), r.PathValue("id")) {
		writeError(w, http.StatusGone, leases.Gone(r.PathValue("table"), r.PathValue("id")))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleLeaseSplits adds uses for one more scan of the table under the
// same lease (a self-join: a second lease could wait behind a commit that
// waits behind the first) and answers with the splits again.
func (s *Server) handleLeaseSplits(w http.ResponseWriter, r *http.Request) {
	lease, ok := s.leases.Splits(r.PathValue("table"), r.PathValue("id"))
	if !ok {
		writeError(w, http.StatusGone, leases.Gone(r.PathValue("table"), r.PathValue("id")))
		return
	}
	writeJSON(w, http.StatusOK, lease)
}

// handleLeaseEnd ends a lease now (the engine's query is over).
func (s *Server) handleLeaseEnd(w http.ResponseWriter, r *http.Request) {
	s.leases.End(r.PathValue("table"), r.PathValue("id"))
	w.WriteHeader(http.StatusNoContent)
}

// queryUnderLease answers a query with lease=ID: this node's part read
// under the lease's hold. A lease that ends during the read (its TTL)
// ends the answer with an error (an NDJSON error line, or the
// Sluice-Error trailer for Arrow): never rows read after the hold.
func (s *Server) queryUnderLease(ctx context.Context, w http.ResponseWriter, name string, req QueryRequest, format string) {
	read, ok := s.leases.Read(name, req.Lease)
	if !ok {
		writeError(w, http.StatusGone, leases.Gone(name, req.Lease))
		return
	}
	defer read.Close()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rc := http.NewResponseController(w)
	stop := context.AfterFunc(read.Ended, func() {
		cancel(context.Cause(read.Ended))
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
	if req.Keyed {
		// A part of a merged read (leasemerge.go): the key index entries
		// that may hide another node's row go first, read before the rows.
		start()
		start = nil
		if err := writeKeyStates(ctx, s.tables[name], req, w); err != nil {
			s.log.Warn("query under a lease failed mid-stream", "table", name, "error", err)
			endWithError(w, format, err)
			return
		}
	}
	n, err := s.query(ctx, name, req, w, format, start, true, read.Keep)
	if err != nil && context.Cause(ctx) != nil && errors.Is(context.Cause(ctx), leases.ErrEnded) {
		err = context.Cause(ctx)
	}
	if err != nil && n < 0 && start != nil {
		code := queryErrorCode(err)
		if errors.Is(err, leases.ErrEnded) {
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
