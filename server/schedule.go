package server

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/sluicedb/sluice/sink"
)

func unixNano(ns int64) time.Time { return time.Unix(0, ns) }

// startSchedulers starts, per table, the compaction loop (every
// compact.interval), the script reload loop (every reload) and the TTL
// loop; they stop when ctx is done and wg counts them.
func (s *Server) startSchedulers(ctx context.Context, wg *sync.WaitGroup) {
	if ttl := s.cfg.Limits.IdempotencyTTL; ttl > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.sweepIdempotency(ctx)
			every(ctx, sweepInterval(ttl), func() { s.sweepIdempotency(ctx) })
		}()
	}
	for _, n := range s.names {
		ts := s.tables[n]
		if ts.cfg.Compact.Interval > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				every(ctx, ts.cfg.Compact.Interval, func() { s.compact(ctx, ts) })
			}()
		}
		if ts.cold != nil {
			if interval, age := ts.cfg.Compact.Iceberg.Orphans(); interval > 0 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					every(ctx, interval, func() { s.deleteOrphans(ctx, ts, age) })
				}()
			}
			s.startMaintain(ctx, wg, ts) // server/maintain.go
		}
		if ts.proc != nil && ts.cfg.Reload > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ts.proc.Watch(ctx, ts.cfg.Reload)
			}()
		}
		if len(ts.table.PrimaryKey()) > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				every(ctx, sparseRewriteInterval, func() { s.rewriteSparse(ctx, ts) })
			}()
		}
		if ts.cfg.TTL > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				every(ctx, min(max(ts.cfg.TTL/10, time.Second), time.Minute), func() { s.expire(ctx, ts) })
			}()
		}
	}
}

func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// expire drops the table's data older than its TTL (range deletions in the
// table package).
func (s *Server) expire(ctx context.Context, ts *tableState) {
	n, err := ts.table.Expire(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("ttl: expire failed", "table", ts.cfg.Name, "error", err)
		}
		return
	}
	ts.expireRuns.Add(1)
	if n > 0 {
		s.log.Info("ttl: expired partitions", "table", ts.cfg.Name, "partitions", n)
	}
}

// sparseRewriteInterval is how often a keyed table's blocks that updates
// left mostly dead are rewritten: a pass with nothing noted reads nothing.
const sparseRewriteInterval = 10 * time.Second

// rewriteSparse rewrites a keyed table's mostly dead blocks, so that its
// queries decode about the live rows only (table.RewriteSparseBlocks).
func (s *Server) rewriteSparse(ctx context.Context, ts *tableState) {
	// Without a cold tier no reader tells blocks apart by sequence: any
	// sparse blocks merge. With one, only those below its committed mark.
	mergeBelow := uint64(math.MaxUint64)
	if ts.cold != nil {
		var err error
		if mergeBelow, err = ts.table.CommittedSeq(); err != nil {
			s.log.Error("rewrite of sparse blocks: read the committed sequence", "table", ts.cfg.Name, "error", err)
			return
		}
	}
	n, err := ts.table.RewriteSparseBlocks(ctx, mergeBelow)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("rewrite of sparse blocks failed", "table", ts.cfg.Name, "error", err)
		}
		return
	}
	if n > 0 {
		s.log.Debug("rewrote sparse blocks", "table", ts.cfg.Name, "blocks", n)
	}
}

// compact writes the table's data older than now-compact.after to Parquet
// files under compact.dir (sink.Compact), optionally removing it from the
// hot store.
func (s *Server) compact(ctx context.Context, ts *tableState) {
	if ts.cold != nil {
		s.compactCold(ctx, ts)
		return
	}
	watermark := s.now().Add(-ts.cfg.Compact.After)
	st, err := sink.Compact(ctx, ts.table, ts.cfg.Compact.Dir, watermark, sink.Options{Remove: ts.cfg.Compact.Remove})
	if err != nil {
		if ctx.Err() == nil {
			ts.compactErrors.Add(1)
			s.log.Error("compaction failed", "table", ts.cfg.Name, "watermark", watermark, "error", err)
		}
		return
	}
	ts.compactRuns.Add(1)
	ts.compactRows.Add(st.Rows)
	ts.lastCompact.Store(st.Watermark.UnixNano())
	if st.Rows > 0 {
		s.log.Info("compacted to parquet", "table", ts.cfg.Name, "rows", st.Rows, "files", len(st.Files), "watermark", st.Watermark)
	}
}
