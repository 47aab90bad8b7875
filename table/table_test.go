package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir) // never returns
	}
	if dir := os.Getenv(keyedChildEnv); dir != "" {
		keyedChild(dir) // never returns
	}
	if dir := os.Getenv(rewriteChildEnv); dir != "" {
		rewriteChild(dir) // never returns
	}
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func openStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{Now: func() time.Time { return t0.Add(100 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func collect(t testing.TB, tb *Table, q Query) []Row {
	t.Helper()
	var out []Row
	if err := tb.Query(context.Background(), q, func(r Row) error { out = append(out, maps.Clone(r)); return nil }); err != nil {
		t.Fatalf("query %+v: %v", q, err)
	}
	return out
}

func TestAppendQueryRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	tb, err := s.Table(Config{Name: "events", HashBy: "user", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	var rows []Row
	for i := range 300 {
		rows = append(rows, Row{
			"ts":    t0.Add(time.Duration(i) * time.Minute).Format(time.RFC3339Nano),
			"user":  int64(i % 3),
			"n":     int64(i),
			"f":     float64(i) / 2,
			"s":     fmt.Sprintf("s%d", i),
			"b":     i%2 == 0,
			"obj":   map[string]any{"k": float64(i)},
			"maybe": map[bool]any{true: "x", false: nil}[i%5 == 0],
		})
	}
	if err := tb.Append(ctx, rows); err != nil {
		t.Fatal(err)
	}
	want := []Column{{"ts", Timestamp}, {"b", Bool}, {"f", Float64}, {"maybe", String}, {"n", Int64}, {"obj", JSON}, {"s", String}, {"user", Int64}}
	if got := tb.Schema(); !slices.Equal(got, want) {
		t.Fatalf("schema %v, want %v", got, want)
	}
	check := func(tb *Table) {
		t.Helper()
		got := collect(t, tb, Query{HashIn: []any{"1"}, From: t0.Add(60 * time.Minute), To: t0.Add(120 * time.Minute)})
		if len(got) != 20 {
			t.Fatalf("got %d rows, want 20", len(got))
		}
		for _, r := range got {
			n := r["n"].(int64)
			if n%3 != 1 || n < 60 || n >= 120 {
				t.Fatalf("row %v out of the query", r)
			}
			if r["ts"] != t0.Add(time.Duration(n)*time.Minute) || r["f"] != float64(n)/2 || r["s"] != fmt.Sprintf("s%d", n) ||
				r["b"] != (n%2 == 0) || string(r["obj"].(json.RawMessage)) != fmt.Sprintf(`{"k":%d}`, n) || r["user"] != int64(1) {
				t.Fatalf("row %v has wrong values", r)
			}
			if (n%5 == 0) != (r["maybe"] == "x") || (n%5 != 0 && r["maybe"] != nil) {
				t.Fatalf("row %v: maybe wrong", r)
			}
		}
		if all := collect(t, tb, Query{}); len(all) != 300 {
			t.Fatalf("full scan: %d rows", len(all))
		}
	}
	check(tb)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tb.Append(ctx, rows); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	s = openStore(t, dir)
	defer s.Close()
	tb, err = s.Table(Config{Name: "events", HashBy: "user", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	if got := tb.Schema(); !slices.Equal(got, want) {
		t.Fatalf("reopened schema %v, want %v", got, want)
	}
	check(tb)
}

func TestOpenTwiceFailsAndTablesAreListed(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	defer s.Close()
	if s2, err := Open(dir, Options{}); err == nil {
		s2.Close()
		t.Fatal("a second Open of the same directory should fail (Pebble's lock)")
	}
	for _, name := range []string{"b", "a"} {
		if _, err := s.Table(Config{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	if names, err := s.Tables(); err != nil || !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("Tables() = %v, %v", names, err)
	}
	if _, err := s.Table(Config{Name: "c", BlockSpan: 7 * time.Hour}); err == nil {
		t.Fatal("a block span that does not divide 24h was accepted")
	}
	if _, err := s.Table(Config{Name: "d", SortBy: "ts", Columns: []Column{{"x", Int64}}}); err == nil {
		t.Fatal("a static schema without the sortBy column was accepted")
	}
}

// A store another process holds (Pebble's flock) is named, with who holds
// it and what to do, not only "resource temporarily unavailable". The
// second Open runs in a child process: flock is per open file, so a lock
// held by this process would look the same, but a child is what users hit.
func TestOpenLockedStoreSaysWhoHoldsIt(t *testing.T) {
	if dir := os.Getenv("SLUICE_TEST_OPEN_LOCKED"); dir != "" {
		_, err := Open(dir, Options{})
		fmt.Print(err)
		return
	}
	dir := t.TempDir()
	s := openStore(t, dir)
	defer s.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenLockedStoreSaysWhoHoldsIt$")
	cmd.Env = append(os.Environ(), "SLUICE_TEST_OPEN_LOCKED="+dir)
	out, _ := cmd.Output()
	msg := string(out)
	if !strings.Contains(msg, dir) || !strings.Contains(msg, "another process") || !strings.Contains(msg, "sluice serve") {
		t.Fatalf("second Open: %q, want the directory, another process and sluice serve named", msg)
	}
}
