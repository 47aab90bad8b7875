package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/table"
)

// TableInfo is what the describe endpoints say about a table.
type TableInfo struct {
	Name     string                 `json:"name"`
	HashBy   string                 `json:"hashBy,omitempty"`
	SortBy   string                 `json:"sortBy,omitempty"`
	TTL      string                 `json:"ttl,omitempty"`
	Static   bool                   `json:"static_schema"`
	Schema   []table.Column         `json:"schema"`
	Computed []compute.ColumnConfig `json:"computed,omitempty"`
	Filters  []compute.FilterConfig `json:"filters,omitempty"`
	Compute  []compute.Stats        `json:"compute_stats,omitempty"`
	Stats    table.Stats            `json:"stats"`
	// Degraded is why the table's computed columns or filters did not
	// load at start (it refuses writes); empty when it serves.
	Degraded string `json:"degraded,omitempty"`
	// Cold is the health of the table's cold tier (compact.iceberg):
	// whether its commits fail, its last commit, its lag. It is not
	// Degraded: the table still takes writes, into its store.
	Cold *ColdStatus `json:"cold,omitempty"`
}

func (s *Server) info(ts *tableState) TableInfo {
	ti := TableInfo{
		Name: ts.cfg.Name, HashBy: ts.cfg.HashBy, SortBy: ts.cfg.SortBy, Static: len(ts.cfg.Schema) > 0,
		Schema: ts.table.Schema(), Computed: ts.compute.Computed, Filters: ts.compute.Filters, Stats: ts.table.Stats(),
		Degraded: ts.degraded,
	}
	if ts.cfg.TTL > 0 {
		ti.TTL = ts.cfg.TTL.String()
	}
	if ts.proc != nil {
		ti.Compute = ts.proc.Stats()
	}
	if ts.coldHealth != nil {
		st := ts.coldHealth.status(s.now(), ti.Stats.RowsAppended)
		ti.Cold = &st
	}
	return ti
}

func (s *Server) handleTables(w http.ResponseWriter, _ *http.Request) {
	out := make([]TableInfo, 0, len(s.names))
	for _, n := range s.names {
		out = append(out, s.info(s.tables[n]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"tables": out})
}

func (s *Server) handleTable(w http.ResponseWriter, r *http.Request) {
	ts, ok := s.tables[r.PathValue("table")]
	if !ok {
		writeError(w, http.StatusNotFound, "unknown table "+r.PathValue("table"))
		return
	}
	writeJSON(w, http.StatusOK, s.info(ts))
}

func (s *Server) handleSchema(w http.ResponseWriter, r *http.Request) {
	ts, ok := s.tables[r.PathValue("table")]
	if !ok {
		writeError(w, http.StatusNotFound, "unknown table "+r.PathValue("table"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"table": ts.cfg.Name, "static": len(ts.cfg.Schema) > 0, "columns": ts.table.Schema()})
}

func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	if !s.ready.Load() {
		w.Header().Set("Retry-After", "5")
		http.Error(w, "not ready\n", http.StatusServiceUnavailable)
		return
	}
	if reason := s.diskFullReason(); reason != "" {
		http.Error(w, "not ready: "+reason+"\n", http.StatusServiceUnavailable)
		return
	}
	if err := s.sources.Ready(); err != nil {
		http.Error(w, "not ready: "+err.Error()+"\n", http.StatusServiceUnavailable)
		return
	}
	if stuck := s.stuckCalls(); len(stuck) > 0 {
		// A call that does not stop holds its partition (or ingest slot)
		// for good: the node is not healthy, whatever else works.
		msgs := make([]string, len(stuck))
		for i, c := range stuck {
			msgs[i] = c.String()
		}
		http.Error(w, "not ready: stuck script calls: "+strings.Join(msgs, "; ")+"\n", http.StatusServiceUnavailable)
		return
	}
	// A degraded table does not make the node unready: the node serves
	// every other table and source, and a load balancer that took it out
	// would take those down too (every node usually shares the script that
	// broke). It is named here, in GET /v1/tables/{table} and in
	// sluice_table_degraded, and its writes get 503.
	var b strings.Builder
	b.WriteString("ready\n")
	for _, n := range s.names {
		if ts := s.tables[n]; ts.degraded != "" {
			fmt.Fprintf(&b, "degraded: table %q refuses writes: %s\n", n, ts.degraded)
		}
	}
	// Nor does a cold tier whose commits fail: the table still stores
	// what comes (the store grows, the Iceberg table goes stale), and
	// every node usually shares the cause (the catalog, the credentials).
	// Its line says since when and why; the metrics say how far behind.
	now := s.now()
	for _, n := range s.names {
		if ts := s.tables[n]; ts.coldHealth != nil {
			b.WriteString(ts.coldHealth.status(now, ts.table.Stats().RowsAppended).readyLine(n))
		}
	}
	// Key routing that is off leaves the node ready: its answers stay
	// exact (every node is asked), only slower.
	for _, off := range s.router.OffTables() {
		fmt.Fprintf(&b, "key routing off (key queries ask every node): %s\n", off)
	}
	io.WriteString(w, b.String())
}
