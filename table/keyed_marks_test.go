package table

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestMarkForms stores marks of blocks of several sizes with few and many
// dead rows and reads them back: the same bitmap, the list form when it is
// shorter, and a bitmap stored before the list form existed read as is.
func TestMarkForms(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, rows := range []int{1, 7, 8, 9, 1000, 8192} {
		for _, dead := range []int{0, 1, 2, 3, rows / 10, rows / 2, rows} {
			mark := newMark(rows)
			for range dead {
				if err := setDead(mark, rng.IntN(rows)); err != nil {
					t.Fatal(err)
				}
			}
			stored := storeMark(nil, mark)
			if len(stored) > len(mark) {
				t.Fatalf("rows %d dead %d: stored %d bytes, the bitmap is %d", rows, dead, len(stored), len(mark))
			}
			if rows == 1000 && dead == 1 && len(stored) > markHeader+2 {
				t.Fatalf("one dead row of 1000 stored in %d bytes, want a list of at most %d", len(stored), markHeader+2)
			}
			got, err := markBits([]byte{0xff, 0xff}, stored)
			if err != nil {
				t.Fatalf("rows %d dead %d: %v", rows, dead, err)
			}
			if !bytes.Equal(got, mark) {
				t.Fatalf("rows %d dead %d: read back %x, stored %x from %x", rows, dead, got, stored, mark)
			}
			if sparse(got) != sparse(mark) || allDead(got) != allDead(mark) {
				t.Fatalf("rows %d dead %d: sparse or allDead differs after a round trip", rows, dead)
			}
		}
	}
	// A bitmap as stores wrote it before the list form: read unchanged.
	old := newMark(1000)
	if err := setDead(old, 999); err != nil {
		t.Fatal(err)
	}
	if got, err := markBits(nil, old); err != nil || !bytes.Equal(got, old) {
		t.Fatalf("a bitmap mark read as %x, %v", got, err)
	}
}

// TestMarkListCorrupt: a list that names a row past its block, or a row
// twice, is an error, not a mark with a wrong row.
func TestMarkListCorrupt(t *testing.T) {
	mark := newMark(100)
	_ = setDead(mark, 10)
	_ = setDead(mark, 20)
	stored := storeMark(nil, mark)
	for name, bad := range map[string][]byte{
		"row past the block": append(bytes.Clone(stored), 90),
		"a row twice":        append(bytes.Clone(stored), 0),
		"truncated varint":   append(bytes.Clone(stored), 0x80),
		"huge block":         {0xff, 0xff, 0xff, 0xff, 1},
	} {
		if _, err := markBits(nil, bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestKeyedFewDeadRows updates and deletes a few scattered keys of one
// 1000-row block, so that its mark is stored as a list of rows, and reads
// the table through queries and Lookup: each key once, at its last value;
// then again after a reopen (the mark read from the store, not the cache)
// and one more change merged into that stored list.
func TestKeyedFewDeadRows(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	defer func() { s.Close() }()
	row := func(id int, v int64) Row {
		return Row{"id": fmt.Sprintf("k%04d", id), "dev": "all", "v": v, "ts": t0}
	}
	var rows []Row
	want := map[string]int64{}
	for id := range 1000 {
		rows = append(rows, row(id, 0))
		want[fmt.Sprintf("k%04d", id)] = 0
	}
	tb := keyedTable(t, s, Config{})
	appendRows(t, tb, rows...)
	changes := []Row{row(3, 1), row(500, 1), row(501, 1), row(998, 1), del("k0007")}
	appendRows(t, tb, changes...)
	for _, id := range []string{"k0003", "k0500", "k0501", "k0998"} {
		want[id] = 1
	}
	delete(want, "k0007")
	wantState(t, tb, want)

	// The stored mark is a list: five dead rows of a thousand.
	bk := blockKeyOfRow(t, tb, "k0000")
	v, closer, err := s.db.Get(deadKey(nil, bk))
	if err != nil {
		t.Fatal(err)
	}
	if !listedMark(v) || len(v) > markHeader+10 {
		t.Errorf("mark of 5 dead rows in 1000 stored in %d bytes (listed %v)", len(v), listedMark(v))
	}
	closer.Close()

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	tb = keyedTable(t, s, Config{})
	wantState(t, tb, want)
	appendRows(t, tb, row(250, 2), row(999, 2))
	want["k0250"], want["k0999"] = 2, 2
	wantState(t, tb, want)
}

// blockKeyOfRow is the key of the block that holds id's current row.
func blockKeyOfRow(t *testing.T, tb *Table, id string) []byte {
	t.Helper()
	ik := keyIndexKey(nil, tb.id, append([]byte{byte(len(id))}, id...))
	v, closer, err := tb.store.db.Get(ik)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	st, err := decodeEntry(ik, v)
	if err != nil || !st.live {
		t.Fatalf("entry of %s: %+v %v", id, st, err)
	}
	return blockKey(nil, tb.id, st.loc.hash, st.loc.minTime, st.loc.seq)
}
