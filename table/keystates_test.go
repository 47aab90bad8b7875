package table

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestKeyStates walks a keyed table's key index: the deleted keys alone,
// or every key, each with its key texts and the source position of its
// last change. A key deleted without a position (c) leaves no entry: there
// is no position to keep against a replay.
func TestKeyStates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openStore(t, t.TempDir())
	defer s.Close()
	tb, err := s.Table(Config{Name: "k", HashBy: "user", SortBy: "ts", PrimaryKey: []string{"user", "n"}})
	if err != nil {
		t.Fatal(err)
	}
	pos := func(r Row, off int64) Row {
		r[SourceBatchColumn] = fmt.Sprintf("kafka/t/2/tid@%d-%d", off, off+1)
		r[SourceOffsetColumn] = off
		return r
	}
	for _, r := range []Row{
		pos(Row{"user": "a", "n": int64(1), "ts": t0}, 10),
		pos(Row{"user": "b", "n": int64(2), "ts": t0}, 11),
		{"user": "c", "n": 3.5, "ts": t0},
		pos(Row{"user": "b", "n": int64(2), "ts": t0, OperationColumn: OperationDelete}, 12),
		{"user": "c", "n": 3.5, "ts": t0, OperationColumn: OperationDelete},
	} {
		if err := tb.Append(ctx, []Row{r}); err != nil {
			t.Fatal(err)
		}
	}
	walk := func(withLive bool) string {
		var out string
		err := tb.KeyStates(ctx, withLive, func(st KeyState) error {
			out += fmt.Sprintf("%q live=%v %s:%d positioned=%v; ", st.Key, st.Live, st.Partition, st.Offset, st.Positioned)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got, want := walk(false), `["b" "2"] live=false kafka/t/2/tid:12 positioned=true; `; got != want {
		t.Errorf("deleted keys:\n got %s\nwant %s", got, want)
	}
	if got, want := walk(true), `["a" "1"] live=true kafka/t/2/tid:10 positioned=true; ["b" "2"] live=false kafka/t/2/tid:12 positioned=true; `; got != want {
		t.Errorf("every key:\n got %s\nwant %s", got, want)
	}
	plain, err := s.Table(Config{Name: "p", HashBy: "user", SortBy: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.KeyStates(ctx, true, func(KeyState) error { return nil }); err == nil {
		t.Error("an append-only table's key states: no error")
	}
}
