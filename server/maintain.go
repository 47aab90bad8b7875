package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/coldapi"
)

// The maintenance of a table's Iceberg table (coldtier.Compactor.Maintain,
// docs/cold-tier.md "Maintenance"): small files rewritten into large ones,
// manifests merged, old snapshots expired, every compact.iceberg.maintain
// .interval and on demand (POST /v1/tables/{table}/maintain,
// `sluice compact --table T --maintain`).

// startMaintain starts the table's maintenance loop: a pass every
// interval (1h by default; none when negative), and one as soon as the
// compaction runs have committed delete_files position delete files since
// the last pass (maintainDue).
func (s *Server) startMaintain(ctx context.Context, wg *sync.WaitGroup, ts *tableState) {
	interval := ts.cfg.Compact.Iceberg.Maintain.MaintainInterval()
	if ts.cold == nil || interval <= 0 && ts.cfg.Compact.Iceberg.Maintain.MaintainDeleteFiles() <= 0 {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		var tick <-chan time.Time
		if interval > 0 {
			t := time.NewTicker(interval)
			defer t.Stop()
			tick = t.C
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick:
			case <-ts.maintainDue:
			}
			// The files committed from here on count toward the next
			// pass: this one may not see them.
			ts.deleteFilesSincePass.Store(0)
			s.maintain(ctx, ts)
		}
	}()
}

// countDeleteFiles adds a run's position delete files to the table's count
// since its last pass and asks the maintenance loop for a pass when it
// reaches delete_files. It never waits: a pass already asked for or
// running takes these files too.
func (s *Server) countDeleteFiles(ts *tableState, n int64) {
	due := ts.cfg.Compact.Iceberg.Maintain.MaintainDeleteFiles()
	if n <= 0 || due <= 0 || ts.maintainDue == nil {
		return
	}
	if ts.deleteFilesSincePass.Add(n) >= int64(due) {
		select {
		case ts.maintainDue <- struct{}{}:
		default:
		}
	}
}

// maintain runs the table's maintenance with its configured options.
func (s *Server) maintain(ctx context.Context, ts *tableState) (coldapi.MaintainStats, error) {
	m := ts.cfg.Compact.Iceberg.Maintain
	st, err := ts.cold.Maintain(ctx, coldapi.MaintainOptions{
		TargetFileBytes: m.TargetFileBytes, MinInputFiles: m.MinInputFiles, KeepSnapshots: m.KeepSnapshots,
		SnapshotAge: m.SnapshotAge, MetadataVersions: m.MetadataVersions,
	})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("iceberg maintenance failed", "table", ts.cfg.Name, "error", err)
		}
		return st, err
	}
	if st.FilesRewritten > 0 || st.PartitionsDeferred > 0 || st.SnapshotsExpired > 0 || st.ManifestsMerged > 0 {
		s.log.Info("iceberg maintenance", "table", ts.cfg.Name, "files_rewritten", st.FilesRewritten, "partitions_deferred", st.PartitionsDeferred,
			"files_written", st.FilesWritten, "manifests_merged", st.ManifestsMerged,
			"snapshots_expired", st.SnapshotsExpired, "files_deleted", st.FilesDeleted,
			"snapshots", st.Snapshots, "data_files", st.DataFiles)
	}
	return st, nil
}

// MaintainResult is what MaintainNow and POST /v1/tables/{table}/maintain
// answer.
type MaintainResult struct {
	Table string `json:"table"`
	// Partitions day partition groups were rewritten: FilesRewritten
	// files (RowsRewritten rows) replaced by FilesWritten.
	Partitions     int `json:"partitions"`
	FilesRewritten int `json:"files_rewritten"`
	FilesWritten   int `json:"files_written"`
	// PartitionsDeferred groups gave way to another writer's deletes of
	// their rows and are left to the next pass.
	PartitionsDeferred int   `json:"partitions_deferred"`
	RowsRewritten      int64 `json:"rows_rewritten"`
	BytesRewritten     int64 `json:"bytes_rewritten"`
	BytesWritten       int64 `json:"bytes_written"`
	ManifestsMerged    int   `json:"manifests_merged"`
	SnapshotsExpired   int   `json:"snapshots_expired"`
	FilesDeleted       int   `json:"files_deleted"`
	// What the table has now.
	Snapshots int `json:"snapshots"`
	DataFiles int `json:"data_files"`
	Manifests int `json:"manifests"`
}

// MaintainNow runs the table's maintenance now, as the scheduler would.
func (s *Server) MaintainNow(ctx context.Context, name string) (MaintainResult, error) {
	res := MaintainResult{Table: name}
	ts, ok := s.tables[name]
	if !ok {
		return res, fmt.Errorf("%w %q", ErrUnknownTable, name)
	}
	if ts.cold == nil {
		return res, fmt.Errorf("table %q: %w", name, errNoIceberg)
	}
	st, err := s.maintain(ctx, ts)
	res.Partitions, res.FilesRewritten, res.FilesWritten, res.RowsRewritten = st.Partitions, st.FilesRewritten, st.FilesWritten, st.RowsRewritten
	res.BytesRewritten, res.BytesWritten, res.ManifestsMerged = st.BytesRewritten, st.BytesWritten, st.ManifestsMerged
	res.SnapshotsExpired, res.FilesDeleted, res.PartitionsDeferred = st.SnapshotsExpired, st.FilesDeleted, st.PartitionsDeferred
	res.Snapshots, res.DataFiles, res.Manifests = st.Snapshots, st.DataFiles, st.Manifests
	return res, err
}

// handleMaintain runs the maintenance now (POST
// /v1/tables/{table}/maintain, `sluice compact --maintain`).
func (s *Server) handleMaintain(w http.ResponseWriter, r *http.Request) {
	res, err := s.MaintainNow(r.Context(), r.PathValue("table"))
	writeRunResult(w, res, err, errNoIceberg)
}

// Maintain asks the server to run the table's maintenance now.
func (c *Client) Maintain(ctx context.Context, tableName string) (MaintainResult, error) {
	var res MaintainResult
	err := c.post(ctx, "maintain "+tableName, "/v1/tables/"+url.PathEscape(tableName)+"/maintain", &res)
	return res, err
}
