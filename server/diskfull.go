package server

import (
	"net/http"
	"strconv"
)

// A full disk: the store refuses writes before Pebble sees ENOSPC
// (table/space.go), the server keeps serving queries, answers ingest with
// 507 Insufficient Storage naming the cause, and reports it in /readyz
// and /metrics until the space is back.

// diskFullRetryAfter is the Retry-After of a 507, in seconds: space comes
// back when someone frees it, so there is no point in a tight retry.
const diskFullRetryAfter = 30

// diskFullStatus sets Retry-After and returns 507 Insufficient Storage,
// the answer to a write refused for lack of disk space. 507 rather than
// 503: the cause is named by the code, and clients that retry 503 for a
// while (sluice's own, for a server starting or shutting down) stop at once
// on a condition that needs an operator.
func diskFullStatus(w http.ResponseWriter) int {
	w.Header().Set("Retry-After", strconv.Itoa(diskFullRetryAfter))
	return http.StatusInsufficientStorage
}

// diskFullReason is why /readyz answers 503 while the store refuses writes
// for lack of space ("" while it takes them).
func (s *Server) diskFullReason() string {
	if full := s.store.SpaceStatus().Full; full != nil {
		return full.Reason()
	}
	return ""
}
