package table

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestStagePublishesAllAtOnce: rows of two tables staged in many parts are
// invisible until Publish, all there after it (and after a reopen), with
// a widened schema persisted; their blocks are numbered above a compaction
// watermark taken while they were staged; the scratch directory is gone.
func TestStagePublishesAllAtOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	main, err := s.Table(Config{Name: "keys", SortBy: "ts", HashBy: "key"})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := s.Table(Config{Name: "keys_deadletter", SortBy: "time"})
	if err != nil {
		t.Fatal(err)
	}
	q := Query{From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}
	if err := main.Append(ctx, []Row{{"ts": t0, "key": "before"}}); err != nil {
		t.Fatal(err)
	}
	st, err := s.NewStage()
	if err != nil {
		t.Fatal(err)
	}
	for part := range 20 {
		rows := make([]Row, 50)
		for i := range rows {
			rows[i] = Row{"ts": t0, "key": "k" + strconv.Itoa(part*50+i), "n": int64(i)}
		}
		if part == 10 {
			rows[0]["late"] = "a column from part 10 on"
		}
		if err := st.Append(ctx, main, rows); err != nil {
			t.Fatal(err)
		}
		if got := collect(t, main, q); len(got) != 1 {
			t.Fatalf("after part %d: %d rows visible before Publish", part, len(got))
		}
	}
	if err := st.Append(ctx, dead, []Row{{"time": t0, "error": "bad"}}); err != nil {
		t.Fatal(err)
	}
	// A compaction's watermark while the stage is open: every block
	// published later must be numbered at or above it.
	_, high, blocks, err := main.BlockRange(ctx, t0.Add(24*time.Hour))
	if err != nil || blocks != 1 {
		t.Fatalf("BlockRange: %d blocks, err %v; want the block appended before", blocks, err)
	}
	if st.Rows(main) != 1000 || st.Rows(dead) != 1 {
		t.Fatalf("staged %d and %d rows", st.Rows(main), st.Rows(dead))
	}
	if err := st.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	scratch := st.Dir()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Fatalf("scratch directory %s still there: %v", scratch, err)
	}
	if got := collect(t, main, q); len(got) != 1001 {
		t.Fatalf("%d rows after Publish, want 1001", len(got))
	}
	var below int
	if err := main.QueryValuesBelow(ctx, q, high+1, func([]Column, []any) error { below++; return nil }); err != nil {
		t.Fatal(err)
	}
	if below != 1 {
		t.Fatalf("%d rows below the watermark %d taken while staging, want only the row appended before", below, high+1)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	defer s.Close()
	main, _ = s.Table(Config{Name: "keys", SortBy: "ts", HashBy: "key"})
	dead, _ = s.Table(Config{Name: "keys_deadletter", SortBy: "time"})
	got := collect(t, main, q)
	late := 0
	for _, r := range got {
		if r["late"] != nil {
			late++
		}
	}
	if len(got) != 1001 || late != 1 {
		t.Fatalf("after reopen: %d rows, %d with the late column", len(got), late)
	}
	if got := collect(t, dead, q); len(got) != 1 {
		t.Fatalf("dead letters after reopen: %v", got)
	}
}

// TestStageClosedUnpublishedStoresNothing: a Stage closed without Publish
// (an input that failed) stores nothing; a scratch directory left by a
// crash is removed by the next NewStage, and a live one is not.
func TestStageClosedUnpublishedStoresNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	defer s.Close()
	tb, err := s.Table(Config{Name: "keys", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.NewStage()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ctx, tb, []Row{{"ts": t0, "key": "a"}, {"ts": t0, "key": "b"}}); err != nil {
		t.Fatal(err)
	}
	scratch := st.Dir()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, tb, Query{From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}); len(got) != 0 {
		t.Fatalf("%d rows stored by a stage closed without Publish", len(got))
	}
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Fatalf("scratch directory still there: %v", err)
	}
	stale := filepath.Join(dir, stagingDir, "stage-left-by-a-crash")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	live, err := s.NewStage()
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("a stale scratch directory survived NewStage: %v", err)
	}
	other, err := s.NewStage()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := os.Stat(live.Dir()); err != nil {
		t.Fatalf("NewStage removed a live stage's directory: %v", err)
	}
}
