package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/coldapi"
)

// The cold tier (package coldtier): tables whose compact section has an
// iceberg destination compact into an Iceberg table, and their queries
// span both tiers when compaction removes rows from the store. The server
// reaches it through coldapi only: a binary links coldtier (iceberg-go and
// the cloud SDKs) only when its main imports it (docs/architecture.md).

// checkColdTiers is, for Check, the tables whose compact.iceberg this
// binary cannot serve: it was built without the cold tier.
func checkColdTiers(cfg *config.Config) []error {
	if coldapi.Linked() {
		return nil
	}
	var errs []error
	for _, tc := range cfg.Tables {
		if tc.Compact.Iceberg != nil {
			errs = append(errs, fmt.Errorf("table %q: compact.iceberg: %w", tc.Name, coldapi.ErrNotLinked))
		}
	}
	return errs
}

// openColdTiers opens the cold tier of each table that has one; stateDir
// (the storage directory) holds the default SQLite catalog and the record
// of a run in flight. A run that crashed after its commit is finished here,
// before anything is served.
func (s *Server) openColdTiers(ctx context.Context, stateDir string) []error {
	var errs []error
	for _, n := range s.names {
		ts := s.tables[n]
		ic := ts.cfg.Compact.Iceberg
		if ic == nil {
			continue
		}
		cat := coldapi.Catalog{Type: ic.Catalog.Type, URI: ic.Catalog.URI, Name: ic.Catalog.Name,
			Namespace: ic.Catalog.Namespace, Properties: ic.Catalog.Properties}
		catalogSecrets(ic.Catalog, &cat)
		cfg := coldapi.Config{
			Warehouse: ic.Warehouse,
			S3:        coldapi.S3{Endpoint: ic.S3.Endpoint, Region: ic.S3.Region, PathStyle: ic.S3.PathStyle},
			Catalog:   cat,
			Node:      ic.Node, StateDir: stateDir, RowGroupRows: ic.RowGroupRows, Unsorted: ic.Unsorted,
			Continuous: ic.Continuous,
			Logger:     s.log.With("table", n),
		}
		c, err := coldapi.Open(ctx, cfg, ts.table)
		if err != nil {
			errs = append(errs, fmt.Errorf("table %q: compact.iceberg: %w", n, err))
			continue
		}
		ts.cold = c
		ts.coldHealth = newColdHealth(ic.Continuous, s.now(), ts.table.CompactedThrough())
	}
	return errs
}

func (s *Server) closeColdTiers() []error {
	var errs []error
	for _, ts := range s.tables {
		if ts.cold != nil {
			errs = append(errs, ts.cold.Close())
		}
	}
	return errs
}

// compactCold is compact for a table with a cold tier.
func (s *Server) compactCold(ctx context.Context, ts *tableState) (coldapi.Stats, error) {
	watermark := s.now().Add(-ts.cfg.Compact.After)
	start := time.Now()
	ts.coldHealth.start(s.now(), ts.table.Stats().RowsAppended)
	st, err := ts.cold.Compact(ctx, watermark, ts.cfg.Compact.Remove)
	if err != nil {
		if ctx.Err() == nil {
			ts.compactErrors.Add(1)
			// Logged at ERROR once a minute at most: /readyz and the
			// metrics say it at any time (docs/operations/health.md).
			failures, loud := ts.coldHealth.failed(s.now(), err)
			level, msg := slog.LevelDebug, "compaction to iceberg failed"
			if loud {
				level = slog.LevelError
			}
			if failures > 1 {
				msg = "compaction to iceberg still failing (the table is degraded in /readyz)"
			}
			s.log.Log(ctx, level, msg, "table", ts.cfg.Name, "consecutive_failures", failures, "watermark", watermark, "error", err)
		}
		return st, err
	}
	ts.compactRuns.Add(1)
	ts.compactRows.Add(st.Rows)
	s.countDeleteFiles(ts, st.DeleteFiles)
	ts.lastCompact.Store(st.Watermark.UnixNano())
	if ended := ts.coldHealth.succeeded(s.now(), st.Watermark); ended > 0 {
		s.log.Info("compaction to iceberg succeeds again", "table", ts.cfg.Name, "failed_runs", ended)
	}
	if st.Rows > 0 || st.Recovered {
		s.log.Info("compacted to iceberg", "table", ts.cfg.Name, "rows", st.Rows, "bytes", st.Bytes,
			"snapshot", st.SnapshotID, "watermark", st.Watermark, "recovered_run", st.Recovered,
			"seconds", time.Since(start).Seconds())
	}
	return st, nil
}

// deleteOrphans deletes the cold tier's orphan files older than age (the
// data files of runs killed before their commit).
func (s *Server) deleteOrphans(ctx context.Context, ts *tableState, age time.Duration) ([]string, error) {
	deleted, err := ts.cold.DeleteOrphanFiles(ctx, age)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("iceberg orphan cleanup failed", "table", ts.cfg.Name, "error", err)
		}
		return nil, err
	}
	if len(deleted) > 0 {
		s.log.Info("deleted iceberg orphan files", "table", ts.cfg.Name, "files", len(deleted), "older_than", age)
	}
	return deleted, nil
}

// OrphansResult is what DeleteOrphansNow and POST
// /v1/tables/{table}/orphans answer.
type OrphansResult struct {
	Table   string   `json:"table"`
	Deleted []string `json:"deleted"`
}

// ErrOrphanAgeFloor: an on-demand orphan cleanup asked for an age below
// the table's floor (orphanFloor).
var ErrOrphanAgeFloor = errors.New("orphan cleanup age below the floor")

// orphanFloor is the least age an on-demand cleanup of ic's table may
// ask for: its orphan_age, the age the scheduled cleanup trusts, and never
// less than config.MinOrphanAge (a lease and a run: an unreferenced file
// younger than that may be an upload whose commit is to come). sluice's
// own uploads in flight are safe whatever the age (their in-flight
// markers); the floor keeps the margin for every other writer of the
// table, whoever sends the request.
func orphanFloor(ic *config.Iceberg) time.Duration {
	_, age := ic.Orphans()
	return max(age, config.MinOrphanAge)
}

// DeleteOrphansNow deletes the orphan files of the table's Iceberg table
// that are older than age (0: the table's compact.iceberg.orphan_age); an
// age below orphanFloor is refused (ErrOrphanAgeFloor).
func (s *Server) DeleteOrphansNow(ctx context.Context, name string, age time.Duration) (OrphansResult, error) {
	res := OrphansResult{Table: name, Deleted: []string{}}
	ts, ok := s.tables[name]
	if !ok {
		return res, fmt.Errorf("%w %q", ErrUnknownTable, name)
	}
	if ts.cold == nil {
		return res, fmt.Errorf("table %q: %w", name, errNoIceberg)
	}
	if age == 0 {
		_, age = ts.cfg.Compact.Iceberg.Orphans()
	}
	if floor := orphanFloor(ts.cfg.Compact.Iceberg); age < floor {
		return res, fmt.Errorf("table %q: %w: older_than %v is below %v (the table's compact.iceberg.orphan_age, never below %v: the longest read lease plus the longest compaction run)",
			name, ErrOrphanAgeFloor, age, floor, config.MinOrphanAge)
	}
	deleted, err := s.deleteOrphans(ctx, ts, age)
	if err != nil {
		return res, err
	}
	res.Deleted = append(res.Deleted, deleted...)
	return res, nil
}

var errNoIceberg = errors.New("the table has no compact.iceberg")

// handleOrphans runs the orphan cleanup now (POST
// /v1/tables/{table}/orphans[?older_than=72h], `sluice compact --orphans`).
func (s *Server) handleOrphans(w http.ResponseWriter, r *http.Request) {
	var age time.Duration
	if v := r.URL.Query().Get("older_than"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("older_than %q: want a duration such as 72h", v))
			return
		}
		// An explicit 0 is an age like any other (refused below the
		// floor), not the default that an absent older_than asks for.
		age = max(d, time.Nanosecond)
	}
	res, err := s.DeleteOrphansNow(r.Context(), r.PathValue("table"), age)
	if errors.Is(err, ErrOrphanAgeFloor) {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeRunResult(w, res, err, errNoIceberg)
}

// writeRunResult answers a run done on demand (compaction, orphan
// cleanup, maintenance): 404 for an unknown table, 400 when the table has
// nothing of the kind (notConfigured), 500 for a failed run, else res.
func writeRunResult(w http.ResponseWriter, res any, err, notConfigured error) {
	switch {
	case errors.Is(err, ErrUnknownTable):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, notConfigured):
		writeError(w, http.StatusBadRequest, err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

// handleCompact runs a compaction now (POST /v1/tables/{table}/compact,
// `sluice compact --table T`) and answers with what it did.
func (s *Server) handleCompact(w http.ResponseWriter, r *http.Request) {
	res, err := s.CompactNow(r.Context(), r.PathValue("table"))
	writeRunResult(w, res, err, errNoCompaction)
}

var errNoCompaction = errors.New("the table has no compact.dir or compact.iceberg")

// CompactNow runs one compaction of the table now, as the scheduler would.
func (s *Server) CompactNow(ctx context.Context, name string) (CompactResult, error) {
	res := CompactResult{Table: name}
	ts, ok := s.tables[name]
	if !ok {
		return res, fmt.Errorf("%w %q", ErrUnknownTable, name)
	}
	switch {
	case ts.cold != nil:
		st, err := s.compactCold(ctx, ts)
		if err != nil {
			return res, err
		}
		res.Rows, res.Bytes, res.Files, res.Snapshot, res.Recovered = st.Rows, st.Bytes, st.Files, st.SnapshotID, st.Recovered
		res.Watermark = st.Watermark
	case ts.cfg.Compact.Dir != "":
		before, errsBefore := ts.compactRows.Load(), ts.compactErrors.Load()
		s.compact(ctx, ts)
		if ts.compactErrors.Load() != errsBefore {
			return res, fmt.Errorf("table %q: compaction failed (see the log)", name)
		}
		res.Rows = ts.compactRows.Load() - before
		res.Watermark = unixNano(ts.lastCompact.Load()).UTC()
	default:
		return res, fmt.Errorf("table %q: %w", name, errNoCompaction)
	}
	return res, nil
}

// Compact asks the server to compact a table now.
func (c *Client) Compact(ctx context.Context, tableName string) (CompactResult, error) {
	var res CompactResult
	err := c.post(ctx, "compact "+tableName, "/v1/tables/"+url.PathEscape(tableName)+"/compact", &res)
	return res, err
}

// DeleteOrphans asks the server to delete the orphan files of the table's
// Iceberg table older than age (0: the table's orphan_age).
func (c *Client) DeleteOrphans(ctx context.Context, tableName string, age time.Duration) (OrphansResult, error) {
	var res OrphansResult
	path := "/v1/tables/" + url.PathEscape(tableName) + "/orphans"
	if age > 0 {
		path += "?older_than=" + url.QueryEscape(age.String())
	}
	err := c.post(ctx, "delete orphans of "+tableName, path, &res)
	return res, err
}

// post sends an empty POST to path and decodes the JSON answer into res.
func (c *Client) post(ctx context.Context, what, path string, res any) error {
	req, err := c.newRequest(ctx, http.MethodPost, path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", what, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, res)
}

// CompactResult is the answer of POST /v1/tables/{table}/compact.
type CompactResult struct {
	Table     string    `json:"table"`
	Rows      int64     `json:"rows"`
	Bytes     int64     `json:"bytes,omitempty"`
	Files     int64     `json:"files,omitempty"`
	Snapshot  int64     `json:"snapshot,omitempty"`
	Recovered bool      `json:"recovered,omitempty"`
	Watermark time.Time `json:"watermark"`
}
