package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/sluicedb/sluice/cluster"
	"github.com/sluicedb/sluice/cluster/leases"
)

// A keyed table's read lease has one split, tier "cluster", read on the
// lease's coordinator (docs/cluster.md, "Read leases"; docs/upserts.md,
// "Which engine reads what"). Per-node splits cannot be exact for a table
// with a primary key: a key whose changes reached two nodes' stores has a
// row, or a delete, in each, and an engine reading each split on its own
// shows every one of them. So the coordinator reads every node's part of
// the lease itself (its own tier "all", each member's tier "hot", each
// node's key index entries first) and merges them by key and source
// position as a cluster query does (keyedmerge.go). Every part is read
// under the lease's hold on its node with that node's share of the source
// offsets: the cut is the one the per-node splits would have read, so a
// second scan of the table under the same lease (a self-join) reads the
// same rows.

// mergedLeaseRead answers a query with lease=ID and tier=cluster on the
// lease's coordinator: every node's part of the lease, merged by key, as
// NDJSON (the merge works on its lines).
func (s *Server) mergedLeaseRead(ctx context.Context, w http.ResponseWriter, name string, req QueryRequest, format string) {
	if format != "" && format != "ndjson" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("a read lease's tier %s answers ndjson only, not %s", leases.TierCluster, format))
		return
	}
	parts, ok := s.leases.Parts(name, req.Lease)
	if !ok {
		writeError(w, http.StatusGone, leases.Gone(name, req.Lease)+" (tier "+leases.TierCluster+" is read on the node that opened the lease)")
		return
	}
	read, ok := s.leases.Read(name, req.Lease)
	if !ok {
		writeError(w, http.StatusGone, leases.Gone(name, req.Lease))
		return
	}
	defer read.Close()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(read.Ended, func() { cancel(context.Cause(read.Ended)) })
	defer stop()

	ts := s.tables[name]
	var members []string
	for _, p := range parts {
		if p.Tier != "all" {
			members = append(members, p.Node)
		}
	}
	req.Cluster, req.Partial, req.Tier, req.Format = false, false, "", "ndjson"
	req, err := s.knowClusterColumns(ctx, ts, req, members)
	if err != nil {
		writeError(w, http.StatusBadGateway, "lease read: "+err.Error())
		return
	}
	q, err := req.tableQuery(ts.table)
	if err != nil {
		writeError(w, queryErrorCode(err), err.Error())
		return
	}
	req = req.withWhere(q)
	req, merge, err := keyedClusterRequest(ctx, ts, req, "ndjson")
	if err != nil {
		writeError(w, queryErrorCode(err), err.Error())
		return
	}
	if merge == nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("tier %s merges a keyed table's lease: table %q has no primary key, read its splits one per node",
			leases.TierCluster, name))
		return
	}
	peer := req
	peer.Tier = "hot"
	body, err := json.Marshal(peer)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	// Every member at once: each reads its part under its own hold of the
	// lease and its answer waits in its connection until its turn.
	answers := s.fanout.Open(ctx, members, func(ctx context.Context, node string) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, node+"/v1/tables/"+url.PathEscape(name)+"/query", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		r.Header.Set("Content-Type", "application/json")
		return r, nil
	})
	defer func() {
		for _, a := range answers {
			a.Close()
		}
	}()
	var errs []error
	for _, a := range answers {
		if a.Err != nil {
			errs = append(errs, a.Err)
		}
	}
	if len(errs) > 0 {
		writeError(w, leaseReadCode(ctx, http.StatusBadGateway), "lease read: "+errors.Join(errs...).Error())
		return
	}
	own, err := merge.own(ctx, ts, req)
	if err == nil {
		_, err = s.query(ctx, name, req, own, "ndjson", nil, true, read.Keep)
	}
	for _, a := range answers {
		if err != nil {
			break
		}
		_, err = merge.readAnswer(a)
	}
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && errors.Is(cause, leases.ErrEnded) {
			err = cause
		}
		writeError(w, leaseReadCode(ctx, queryErrorCode(err)), "lease read: "+err.Error())
		return
	}
	setContentType(w, "ndjson")
	w.WriteHeader(http.StatusOK)
	if _, err := merge.writeTo(w); err != nil && !cluster.ClientLeft(ctx, err) {
		s.log.Warn("lease read failed mid-stream", "table", name, "error", err)
		endWithError(w, "ndjson", err)
	}
}

// leaseReadCode is code, or 410 Gone when the lease ended during the read.
func leaseReadCode(ctx context.Context, code int) int {
	if cause := context.Cause(ctx); cause != nil && errors.Is(cause, leases.ErrEnded) {
		return http.StatusGone
	}
	return code
}
