package server

import (
	"fmt"
	"io"
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

// writeDiskMetrics writes the store's disk-space families.
func (s *Server) writeDiskMetrics(w io.Writer) {
	st := s.store.SpaceStatus()
	family := func(name, kind, help string, v uint64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", name, help, name, kind, name, v)
	}
	b := func(v bool) uint64 {
		if v {
			return 1
		}
		return 0
	}
	family("sluice_store_disk_free_bytes", "gauge", "Bytes available on the store's filesystem.", st.Free)
	family("sluice_store_disk_min_free_bytes", "gauge", "Free space writes must leave (storage.min_free_bytes; 0: no guard).", st.MinFree)
	held := uint64(0)
	if st.ReserveHeld {
		held = st.Reserve
	}
	family("sluice_store_disk_reserve_bytes", "gauge", "Size of the reserve file in place (0 while it is released).", held)
	family("sluice_store_disk_full", "gauge", "1 while writes are refused for lack of disk space (ingest answers 507, sources retry).", b(st.Full != nil))
	family("sluice_store_read_only", "gauge", "1 while the store is open read-only (it started on a disk too full to replay its log).", b(st.ReadOnly))
	family("sluice_store_writes_refused_total", "counter", "Writes refused for lack of disk space.", uint64(st.Refused))
}
