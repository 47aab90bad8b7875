package table

import (
	"context"
	"errors"
	"testing"
	"time"
)

// stagePositionRows are the rows TestStagePosition* stage: enough for a few
// blocks.
func stagePositionRows(part int) []Row {
	rows := make([]Row, 200)
	for i := range rows {
		rows[i] = Row{"ts": t0, "key": "k", "n": int64(part*200 + i)}
	}
	return rows
}

// TestStagePositionPublishedWithRows: a position set on a Stage is not
// stored before Publish, is stored with the rows after it (and after a
// reopen), and a Stage closed without Publish stores neither.
func TestStagePositionPublishedWithRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	s := openStore(t, dir)
	tb, err := s.Table(Config{Name: "objs", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	q := Query{From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}

	dropped, err := s.NewStage()
	if err != nil {
		t.Fatal(err)
	}
	if err := dropped.Append(ctx, tb, stagePositionRows(0)); err != nil {
		t.Fatal(err)
	}
	if err := dropped.SetPosition("objs/s3/b/dropped", []byte("e0")); err != nil {
		t.Fatal(err)
	}
	if err := dropped.Close(); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.Position("objs/s3/b/dropped"); p != nil || len(collect(t, tb, q)) != 0 {
		t.Fatalf("a stage closed without Publish stored position %q and %d rows", p, len(collect(t, tb, q)))
	}

	st, err := s.NewStage()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for part := range 3 {
		if err := st.Append(ctx, tb, stagePositionRows(part)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.SetPosition("objs/s3/b/key", []byte("e1")); err != nil {
		t.Fatal(err)
	}
	if err := st.SetPosition("objs/s3/b/a-first", []byte("e2")); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.Position("objs/s3/b/key"); p != nil {
		t.Fatalf("position %q visible before Publish", p)
	}
	if err := st.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for name, want := range map[string]string{"objs/s3/b/key": "e1", "objs/s3/b/a-first": "e2"} {
			if p, err := s.Position(name); err != nil || string(p) != want {
				t.Fatalf("%s: position %s = %q, %v; want %q", when, name, p, err, want)
			}
		}
		if n := len(collect(t, tb, q)); n != 600 {
			t.Fatalf("%s: %d rows, want 600", when, n)
		}
	}
	check("after Publish")
	st.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	defer s.Close()
	if tb, err = s.Table(Config{Name: "objs", SortBy: "ts"}); err != nil {
		t.Fatal(err)
	}
	check("after a reopen")
}

// errCrash stands for a crash at a stageFault point.
var errCrash = errors.New("crash")

// TestStagePositionCrashPoints: Publish ended at each of its fault points
// (the sstables written but not ingested; ingested, the caller not told)
// leaves, once the store is reopened, neither the rows nor the position, or
// both.
func TestStagePositionCrashPoints(t *testing.T) {
	for _, tc := range []struct {
		point string
		rows  int
		pos   string
	}{{"before-ingest", 0, ""}, {"after-ingest", 400, "etag"}} {
		t.Run(tc.point, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dir := t.TempDir()
			s := openStore(t, dir)
			tb, err := s.Table(Config{Name: "objs", SortBy: "ts"})
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.NewStage()
			if err != nil {
				t.Fatal(err)
			}
			for part := range 2 {
				if err := st.Append(ctx, tb, stagePositionRows(part)); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.SetPosition("objs/s3/b/key", []byte("etag")); err != nil {
				t.Fatal(err)
			}
			stageFault = func(point string) error {
				if point == tc.point {
					return errCrash
				}
				return nil
			}
			err = st.Publish(ctx)
			stageFault = nil
			if !errors.Is(err, errCrash) {
				t.Fatalf("Publish = %v, want the crash at %s", err, tc.point)
			}
			st.Close()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, dir)
			defer s.Close()
			if tb, err = s.Table(Config{Name: "objs", SortBy: "ts"}); err != nil {
				t.Fatal(err)
			}
			p, err := s.Position("objs/s3/b/key")
			if err != nil {
				t.Fatal(err)
			}
			rows := len(collect(t, tb, Query{From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}))
			if rows != tc.rows || string(p) != tc.pos {
				t.Fatalf("crash %s, reopened: %d rows and position %q; want %d rows and position %q (both or neither)", tc.point, rows, p, tc.rows, tc.pos)
			}
		})
	}
}
