package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/cluster"
	"github.com/sluicedb/sluice/cluster/keyroute"
	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/rowformat"
	"github.com/sluicedb/sluice/table"
)

// beforeOwnPart, when a test sets it, runs on a coordinator after every
// member holds and before it reads its own part: a coordinator busy for a
// while, which its members must wait for.
var beforeOwnPart atomic.Pointer[func()]

// afterOwnPart, when a test sets it, runs on a coordinator once it has
// read its own part and marked every member's request body, before it
// reads any member's answer.
var afterOwnPart atomic.Pointer[func()]

// beforeShareWait, when a test sets it, runs on a member before it waits
// for its share, with the channel closed when its request body ends.
var beforeShareWait atomic.Pointer[func(ended <-chan struct{})]

// newNodeID is a random id for this process: a coordinator recognises its
// own request among the members' by it, whatever address the member list
// knows it by (a pod IP, a service name, localhost).
func newNodeID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// clusterMembers makes the discovery the config asks for; nil when it
// names none.
func clusterMembers(c config.Cluster) (cluster.Members, error) {
	switch {
	case len(c.Members) > 0:
		return cluster.Static(c.Members), nil
	case c.DNS != "":
		d, err := cluster.ParseDNS(c.DNS, c.Scheme)
		return d, err
	}
	return nil, nil
}

// ClusterInfo is GET /v1/cluster: this node's id and the members it finds
// now (none without a cluster config). The Trino connector makes one split
// per member from it.
type ClusterInfo struct {
	Node    string   `json:"node"`
	Members []string `json:"members"`
	// Routing is what this node holds of its key_partitioned tables
	// (docs/cluster.md, "Key queries"); absent when it routes none.
	Routing *cluster.Holdings `json:"routing,omitempty"`
}

func (s *Server) handleCluster(w http.ResponseWriter, r *http.Request) {
	info := ClusterInfo{Node: s.nodeID, Members: []string{}}
	if s.router != nil {
		h := s.router.Holdings()
		info.Routing = &h
	}
	// members=false: the routing polls want only the holdings (no DNS
	// lookup).
	if s.members != nil && r.URL.Query().Get("members") != "false" {
		m, err := s.members.Members(r.Context())
		if err != nil {
			writeError(w, http.StatusBadGateway, err.Error())
			return
		}
		info.Members = m
	}
	writeJSON(w, http.StatusOK, info)
}

// newKeyRouter makes the key routing of s's tables whose Kafka sources
// are key_partitioned; nil when s has no cluster config or no such table.
func (s *Server) newKeyRouter() *keyroute.Router {
	if s.members == nil {
		return nil
	}
	var tables []keyroute.Table
	for _, n := range s.names {
		ts := s.tables[n]
		var rt *keyroute.Table
		for _, sc := range ts.cfg.Sources {
			if sc.Kafka == nil || !sc.Kafka.KeyPartitioned {
				continue
			}
			if rt == nil {
				rt = &keyroute.Table{Name: n, Rows: ts.table, Off: &ts.routingOff, SourceColumns: ts.cfg.Compact.Iceberg != nil}
				for _, c := range ts.cfg.Schema {
					if c.Name == ts.cfg.HashBy {
						rt.KeyType = c.Type
					}
				}
				rt.Conn, rt.ConnErr = kafkaConn(*sc.Kafka)
			}
			rt.Brokers = append(rt.Brokers, sc.Kafka.Brokers...)
			rt.Topics = append(rt.Topics, sc.Kafka.Topics...)
		}
		if rt != nil {
			tables = append(tables, *rt)
		}
	}
	return keyroute.New(keyroute.Config{Node: s.nodeID, Members: s.members, Client: s.memberClient(keyroute.Lease / 2),
		Store: s.store, Log: s.log, Tables: tables})
}

// handleHoldings is POST /v1/cluster/holdings: a member announces its
// report; it is applied before the answer (the member stores rows of its
// new partitions once every member answered).
func (s *Server) handleHoldings(w http.ResponseWriter, r *http.Request) {
	var h cluster.Holdings
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&h); err != nil {
		writeError(w, http.StatusBadRequest, "holdings: "+err.Error())
		return
	}
	// A report about node X is X's alone: a member reporting for another
	// (empty holdings at a huge version) would make key queries skip X.
	if p := principalOf(r); p != nil && p.Node() != h.Node {
		s.audit.refused(r, p, "POST /v1/cluster/holdings", "", http.StatusForbidden, "a holdings report about another node")
		writeError(w, http.StatusForbidden, fmt.Sprintf("holdings: %s may report only its own holdings, not node %q's", p.Name, h.Node))
		return
	}
	if s.router == nil {
		writeError(w, http.StatusNotFound, "holdings: this node routes no table by key")
		return
	}
	if !s.router.Announced(h) {
		writeError(w, http.StatusConflict, "holdings: node "+h.Node+" has not answered this node's polls yet")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ingestRefused says why HTTP ingest into a routed table is refused.
func ingestRefused(name string) string {
	return fmt.Sprintf("table %q takes rows only from its key_partitioned Kafka sources: rows posted to a node would be where key queries do not look (docs/cluster.md, \"Key queries\")", name)
}

// clusterQuery answers req for the whole cluster: this node's answer (the
// cold tier's rows and its own store's) followed by every other member's
// store rows (tier hot), each member asked at once and streamed in turn,
// so memory stays that of one buffer per node whatever the answer's size.
// A member that fails fails the query with its name, unless req.Partial.
func (s *Server) clusterQuery(ctx context.Context, w http.ResponseWriter, name string, req QueryRequest, format string) {
	if s.members == nil {
		writeError(w, http.StatusBadRequest, "cluster query: this node has no cluster config (cluster.members or cluster.dns)")
		return
	}
	nodes, err := s.members.Members(ctx)
	if err != nil {
		writeError(w, http.StatusBadGateway, "cluster query: "+err.Error())
		return
	}
	// A key query asks only the nodes that may hold rows of its keys'
	// partitions, when that is known (cluster/keyroute).
	if asked, why := s.router.Route(name, req.Hash, nodes); why == "" {
		nodes = asked
	} else if s.router != nil && len(req.Hash) > 0 {
		s.log.Debug("cluster query: asking every node", "table", name, "why", why)
	}
	ts := s.tables[name]
	// A column this node's store lacks may be the Iceberg table's or
	// another node's: each node answers it as null where it has none, and
	// only a column no one has fails the query.
	req, err = s.knowClusterColumns(ctx, ts, req, nodes)
	if err != nil {
		writeError(w, http.StatusBadGateway, "cluster query: "+err.Error())
		return
	}
	q, err := req.tableQuery(ts.table)
	if err != nil {
		writeError(w, queryErrorCode(err), err.Error())
		return
	}
	// Every node reads a where clause's path and a column's as this one
	// did (WhereClause, QueryRequest.Paths).
	req = req.withWhere(q).withColumns(q)
	// A keyed table's answers are merged to one row per key (keyedmerge.go).
	req, merge, err := keyedClusterRequest(ctx, ts, req, format)
	if err != nil {
		writeError(w, queryErrorCode(err), err.Error())
		return
	}
	encoded, isEncoded := rowformat.Lookup(format)
	if (format == "csv" || isEncoded) && len(req.Columns) == 0 {
		// Every node's CSV (Arrow) must have the same columns in the same
		// order: ask all of them for this node's.
		q, err := req.tableQuery(ts.table)
		if err == nil {
			cols, _, cerr := splitAbsent(ctx, ts, q)
			err = cerr
			for _, c := range cols {
				req.Columns = append(req.Columns, c.Name)
			}
		}
		if err != nil {
			writeError(w, queryErrorCode(err), err.Error())
			return
		}
	}
	local := req
	local.Cluster, local.Partial, local.Tier = false, false, ""
	peer := local
	peer.Tier, peer.Format, peer.Offsets = "hot", format, true
	body, err := json.Marshal(peer)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	// Every member holds its cold tier from before its header until this
	// node has read its own part (the Iceberg table's rows included), so
	// no member commits between its read of its store and ours of the
	// table (docs/cluster.md, "What is exact"; cluster.Query).
	cq := cluster.OpenQuery(ctx, s.fanout, nodes, cluster.QueryOptions{
		URL:         func(node string) string { return node + "/v1/tables/" + url.PathEscape(name) + "/query" },
		Body:        body,
		Coordinator: s.nodeID,
		Beat:        s.readerTimeout() / 4,
	})
	defer cq.Close()
	missing, errs := cq.Failed()
	if len(errs) > 0 && !req.Partial {
		writeError(w, http.StatusBadGateway, "cluster query: "+errors.Join(errs...).Error())
		return
	}
	for _, err := range errs {
		s.log.Warn("cluster query: partial answer without a node", "table", name, "error", err)
	}
	start := func() {
		setContentType(w, format)
		w.Header().Set(cluster.HeaderAsked, strings.Join(nodes, ","))
		w.Header().Set("Trailer", cluster.HeaderMissing)
		if isEncoded {
			w.Header().Add("Trailer", cluster.TrailerError)
		}
		if len(missing) > 0 {
			w.Header().Set(cluster.HeaderMissing, strings.Join(missing, ","))
		}
		w.WriteHeader(http.StatusOK)
	}
	// Every member that answered holds its tier now: hold ours for our
	// own part. The wait is bounded by the node timeout: two cluster
	// queries and two waiting commits can wait on each other (a member's
	// hold blocks its commit, which blocks the other coordinator's hold).
	holdTimeout := s.fanout.NodeTimeout
	if holdTimeout <= 0 {
		holdTimeout = cluster.DefaultNodeTimeout
	}
	holdCtx, cancelHold := context.WithTimeout(ctx, holdTimeout)
	release, err := s.holdTier(holdCtx, ts)
	cancelHold()
	if err != nil {
		writeError(w, http.StatusBadGateway, "cluster query: this node: "+err.Error())
		return
	}
	defer release()
	// Each message once: every node that reads its store (this one
	// first) reports the source offsets its rows hold, each offset is
	// given to one of them, and each answers only for its share
	// (overlap.go). Every member waits for its share before it reads.
	keep, err := s.shareOffsets(ctx, ts, local, cq)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "cluster query: this node: "+err.Error())
		return
	}
	ownPart := func() {
		release()
		cq.OwnPartRead()
		if hook := afterOwnPart.Load(); hook != nil {
			(*hook)()
		}
	}
	if hook := beforeOwnPart.Load(); hook != nil {
		(*hook)()
	}
	// The client's writes are bounded: a client that stops reading fails
	// the query (and ends every hold) after the reader timeout.
	client := cluster.DeadlineWriter{W: w, RC: http.NewResponseController(w), Limit: s.readerTimeout(), End: deadline(s.cfg.Limits.QueryTimeout)}
	if isEncoded {
		s.clusterQueryEncoded(ctx, w, client, ts, local, keep, encoded, cq, missing, start, ownPart)
		return
	}
	var own io.Writer = client
	if merge != nil {
		if own, err = merge.own(ctx, ts, local); err != nil {
			writeError(w, http.StatusInternalServerError, "cluster query: this node: "+err.Error())
			return
		}
	}
	n, err := s.query(ctx, name, local, own, format, start, true, keep)
	ownPart()
	if err != nil && n < 0 {
		writeError(w, queryErrorCode(err), err.Error())
		return
	}
	if cluster.ClientLeft(ctx, err) {
		s.log.Info("cluster query: the client left before the end of the answer", "table", name, "rows", n, "error", err)
		return
	}
	if err != nil {
		s.log.Warn("cluster query failed mid-stream", "table", name, "rows", n, "error", err)
		endWithError(w, format, err)
		return
	}
	copyAnswer := cluster.CopyLines
	if format == "csv" {
		copyAnswer = cluster.CopyCSV
	}
	limit := req.Limit
	if merge != nil {
		// The merge applies the client's limit to the merged rows: every
		// member's answer is read whole (a member may hide a row of another).
		limit = 0
	}
	n, late, left, err := cq.Merge(ctx, n, limit, req.Partial, nil, func(a *cluster.Answer, left int) (int, error) {
		if merge != nil {
			return merge.readAnswer(a)
		}
		return copyAnswer(client, a, left)
	})
	if merge != nil && err == nil && !left {
		_, err = merge.writeTo(client)
		left = cluster.ClientLeft(ctx, err)
	}
	if left {
		// The client hung up or stopped reading: no member failed,
		// and there is no one to tell.
		s.log.Info("cluster query: the client left before the end of the answer", "table", name, "rows", n, "error", err)
		return
	}
	if err != nil {
		s.log.Warn("cluster query failed mid-stream", "table", name, "rows", n, "error", err)
		endWithError(w, format, err)
		return
	}
	s.logLate(name, late)
	// The trailer lists every node the answer lacks (Go sends a declared
	// trailer's value as it is when the handler returns).
	if all := append(missing, nodesOf(late)...); len(all) > 0 {
		w.Header().Set(cluster.HeaderMissing, strings.Join(all, ","))
	}
}

// logLate logs the members a partial answer lacks the rest of.
func (s *Server) logLate(name string, late []*cluster.NodeError) {
	for _, err := range late {
		s.log.Warn("cluster query: partial answer without the rest of a node", "table", name, "error", err.Err)
	}
}

// nodesOf names the nodes of errs.
func nodesOf(errs []*cluster.NodeError) []string {
	nodes := make([]string, len(errs))
	for i, err := range errs {
		nodes[i] = err.Node
	}
	return nodes
}

// clusterQueryEncoded is clusterQuery's second half for a format of
// internal/rowformat (Arrow): one encoder takes this node's rows and then
// appends every other node's answer, so the client gets one stream. An
// error after the header is reported in the Sluice-Error trailer (an Arrow
// stream has no error row).
func (s *Server) clusterQueryEncoded(ctx context.Context, w http.ResponseWriter, client io.Writer, ts *tableState, req QueryRequest,
	keep cluster.Offsets, f rowformat.Format, cq *cluster.Query, missing []string, start func(), ownPart func()) {
	fail := func(err error) {
		s.log.Warn("cluster query failed mid-stream", "table", ts.cfg.Name, "error", err)
		w.Header().Set(cluster.TrailerError, err.Error())
	}
	q, err := req.tableQuery(ts.table)
	var cols []table.Column
	var absent *table.Absent
	if err == nil {
		cols, absent, err = splitAbsent(ctx, ts, q)
	}
	if err != nil {
		writeError(w, queryErrorCode(err), err.Error())
		return
	}
	sw := &cluster.StartWriter{W: client, Start: start}
	bw := bufio.NewWriterSize(sw, 64<<10)
	enc, err := f.NewEncoder(bw, cols)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer enc.Close()
	n := 0
	err = s.absentValues(ctx, ts, q, absent, false, true, keep, func(_ []table.Column, vals []any) error {
		n++
		return enc.Row(vals)
	})
	ownPart()
	if err != nil && !sw.Started {
		writeError(w, queryErrorCode(err), err.Error())
		return
	}
	if err != nil {
		fail(err)
		return
	}
	// An answer of another type is the coordinator's own 204.
	skip := func(a *cluster.Answer) bool { return a.Header.Get("Content-Type") != f.ContentType }
	n, late, left, err := cq.Merge(ctx, n, req.Limit, req.Partial, skip, func(a *cluster.Answer, left int) (int, error) {
		copied, err := enc.Append(a, left)
		if err != nil {
			err = fmt.Errorf("node %s: %w", a.Node, err)
		}
		return copied, err
	})
	if left {
		// The client hung up or stopped reading: no member failed,
		// and there is no one to tell.
		s.log.Info("cluster query: the client left before the end of the answer", "table", ts.cfg.Name, "rows", n, "error", err)
		return
	}
	if err != nil {
		fail(err)
		return
	}
	s.logLate(ts.cfg.Name, late)
	if err := enc.Close(); err != nil {
		fail(err)
		return
	}
	if err := bw.Flush(); err != nil {
		fail(err)
		return
	}
	if !sw.Started {
		start()
	}
	if all := append(missing, nodesOf(late)...); len(all) > 0 {
		w.Header().Set(cluster.HeaderMissing, strings.Join(all, ","))
	}
}

// shareOffsets gives each source offset held by this node's store or by
// a member's to one of them, this node first, sends every member its
// share, and returns this node's (cluster.Query.Share).
func (s *Server) shareOffsets(ctx context.Context, ts *tableState, req QueryRequest, cq *cluster.Query) (cluster.Offsets, error) {
	q, err := req.tableQuery(ts.table)
	if err != nil {
		return nil, err
	}
	own, err := s.heldOffsets(ctx, ts, q)
	if err != nil {
		return nil, err
	}
	return cq.Share(own)
}

// readerTimeout is cluster.reader_timeout, or its default.
func (s *Server) readerTimeout() time.Duration {
	if t := s.cfg.Cluster.ReaderTimeout; t > 0 {
		return t
	}
	return config.DefaultReaderTimeout
}
