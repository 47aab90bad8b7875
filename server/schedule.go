package server

import (
	"context"
	"sync"
	"time"
)

func unixNano(ns int64) time.Time { return time.Unix(0, ns) }

// startSchedulers starts, per table, the compaction loop (every
// compact.interval) and the TTL loop; they stop when ctx is done and wg
// counts them.
func (s *Server) startSchedulers(ctx context.Context, wg *sync.WaitGroup) {
	for _, n := range s.names {
		ts := s.tables[n]
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
