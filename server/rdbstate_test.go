package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/redisproc"
)

const rdbStateConfig = `
listen: {http: "127.0.0.1:0"}
tables:
  - name: keys
    hashBy: db
    primary_key: [db, key]
  - name: plain
    hashBy: db
`

// redisHolds reads through the redis protocol every key of dbs with its
// value, as "db/key" → the value in canonical JSON (a string, a list, an
// object of a hash's fields): what the server holds, hence what a SAVE
// now writes.
func redisHolds(t *testing.T, srv *redisproc.Server, dbs ...int) map[string]string {
	t.Helper()
	do := func(args ...string) any {
		t.Helper()
		v, err := srv.Do(args...)
		if err != nil {
			t.Fatalf("redis %q: %v", args, err)
		}
		return v
	}
	strs := func(v any) []string {
		var out []string
		for _, e := range v.([]any) {
			out = append(out, string(e.([]byte)))
		}
		return out
	}
	held := map[string]string{}
	for _, db := range dbs {
		do("SELECT", strconv.Itoa(db))
		for _, key := range strs(do("KEYS", "*")) {
			var value any
			switch typ := string(do("TYPE", key).([]byte)); typ {
			case "string":
				value = string(do("GET", key).([]byte))
			case "list":
				value = strs(do("LRANGE", key, "0", "-1"))
			case "hash":
				kv := strs(do("HGETALL", key))
				m := map[string]string{}
				for i := 0; i+1 < len(kv); i += 2 {
					m[kv[i]] = kv[i+1]
				}
				value = m
			default:
				t.Fatalf("key %q: type %s not compared by this test", key, typ)
			}
			b, _ := json.Marshal(value)
			held[fmt.Sprintf("%d/%s", db, key)] = string(b)
		}
	}
	do("SELECT", "0")
	return held
}

// tableHolds is redisHolds for the keyed table: "db/key" → value, failing
// on a key returned twice.
func tableHolds(t *testing.T, s *testServer) map[string]string {
	t.Helper()
	held := map[string]string{}
	for _, r := range queryAll(t, s, "keys", "columns=db,key,value") {
		k := fmt.Sprintf("%v/%v", r["db"], r["key"])
		if _, ok := held[k]; ok {
			t.Fatalf("key %s returned twice", k)
		}
		var v any
		switch raw := r["value"].(type) {
		case string:
			if err := json.Unmarshal([]byte(raw), &v); err != nil {
				v = raw
			}
		default:
			v = raw
		}
		if pairs, ok := v.([]any); ok && len(pairs) > 0 {
			// A hash is a list of {"field", "value"} (docs/rdb.md).
			if first, isObject := pairs[0].(map[string]any); isObject && first["field"] != nil {
				m := map[string]any{}
				for _, p := range pairs {
					p := p.(map[string]any)
					m[p["field"].(string)] = p["value"]
				}
				v = m
			}
		}
		b, _ := json.Marshal(v)
		held[k] = string(b)
	}
	return held
}

// sameState fails t unless the table holds exactly want, key by key.
func sameState(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			diffs = append(diffs, "missing "+k)
		} else if g != v {
			diffs = append(diffs, fmt.Sprintf("%s: %s, redis %s", k, g, v))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, "not in redis: "+k)
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		if len(diffs) > 10 {
			diffs = append(diffs[:10], fmt.Sprintf("... %d more", len(diffs)-10))
		}
		t.Fatalf("%s: the table (%d keys) is not redis's state (%d keys):\n%s", what, len(got), len(want), strings.Join(diffs, "\n"))
	}
}

// saveSnapshot runs SAVE and reads the file (the next SAVE replaces it).
func saveSnapshot(t *testing.T, srv *redisproc.Server) []byte {
	t.Helper()
	path, err := srv.Save()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRDBStateFollowsSnapshots has a real redis-server write three
// snapshots with keys added, changed and removed between them, and
// ingests each with mode=state into a table keyed by (db, key): after each
// the table holds exactly what redis held at the SAVE, read through the
// redis protocol. The same snapshot twice changes nothing (no block is
// written); an older one is refused with 409; an ingest interrupted
// between two batches leaves a mix that its retry makes exact; another
// snapshot with a generation already made whole is refused; an empty
// snapshot empties the table.
func TestRDBStateFollowsSnapshots(t *testing.T) {
	redisproc.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := redisproc.Start(ctx, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	s := startServer(t, rdbStateConfig, "")
	keyed := s.tables["keys"].table
	blocks := func() int {
		t.Helper()
		_, _, _, n, err := keyed.SeqRange(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	ingestState := func(snap []byte, params string) (int, map[string]any) {
		t.Helper()
		return postRDB(t, s.url+"/v1/tables/keys/rows?mode=state&batch=10&"+params, bytes.NewReader(snap))
	}
	fill := func(db int, from, to int, tag string) {
		t.Helper()
		if err := srv.Pipeline(ctx, func(w *bufio.Writer) error {
			redisproc.WriteCommand(w, "SELECT", strconv.Itoa(db))
			for i := from; i < to; i++ {
				k := fmt.Sprintf("k:%03d", i)
				switch i % 3 {
				case 0:
					redisproc.WriteCommand(w, "SET", k, tag+k)
				case 1:
					redisproc.WriteCommand(w, "DEL", k)
					redisproc.WriteCommand(w, "RPUSH", k, tag, k)
				case 2:
					redisproc.WriteCommand(w, "HSET", k, "tag", tag, "key", k)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	// Snapshot 1: 100 keys in db 0, 50 in db 3; its generation its ctime.
	fill(0, 0, 100, "one")
	fill(3, 0, 50, "one")
	state1 := redisHolds(t, srv, 0, 3)
	snap1 := saveSnapshot(t, srv)
	code, res := ingestState(snap1, "")
	if code != 200 || res["mode"] != RDBState || res["accepted"] != 150.0 || res["deleted"] != nil {
		t.Fatalf("snapshot 1: %d %v", code, res)
	}
	gen1, _ := res["generation"].(float64)
	if now := float64(time.Now().Unix()); gen1 < now-60 || gen1 > now+1 {
		t.Fatalf("snapshot 1: generation %v, want the snapshot's ctime (about %v)", gen1, now)
	}
	sameState(t, "snapshot 1", tableHolds(t, s), state1)

	// The same snapshot again: every row is a replay; no block is written.
	before := blocks()
	if code, res := ingestState(snap1, ""); code != 200 || res["deleted"] != nil {
		t.Fatalf("snapshot 1 again: %d %v", code, res)
	}
	if after := blocks(); after != before {
		t.Fatalf("snapshot 1 again wrote blocks: %d, then %d", before, after)
	}
	sameState(t, "snapshot 1 again", tableHolds(t, s), state1)

	// Snapshot 2: keys 0-29 of db 0 changed, 80-99 removed, 100-119 added;
	// db 3 emptied. Its ctime may be snapshot 1's (the same second): the
	// generation orders it.
	fill(0, 0, 30, "two")
	if err := srv.Pipeline(ctx, func(w *bufio.Writer) error {
		for i := 80; i < 100; i++ {
			redisproc.WriteCommand(w, "DEL", fmt.Sprintf("k:%03d", i))
		}
		redisproc.WriteCommand(w, "SELECT", "3")
		redisproc.WriteCommand(w, "FLUSHDB")
		redisproc.WriteCommand(w, "SELECT", "0")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	fill(0, 100, 120, "two")
	state2 := redisHolds(t, srv, 0, 3)
	snap2 := saveSnapshot(t, srv)
	gen2 := strconv.FormatInt(int64(gen1)+10, 10)
	code, res = ingestState(snap2, "generation="+gen2)
	if code != 200 || res["deleted"] != 70.0 {
		t.Fatalf("snapshot 2: %d %v, want 70 keys deleted (20 of db 0, 50 of db 3)", code, res)
	}
	sameState(t, "snapshot 2", tableHolds(t, s), state2)

	// Snapshot 1 after snapshot 2: refused, nothing changes.
	code, res = ingestState(snap1, "")
	if msg, _ := res["error"].(string); code != 409 || !strings.Contains(msg, "older") {
		t.Fatalf("snapshot 1 after 2: %d %v, want 409 naming an older snapshot", code, res)
	}
	sameState(t, "snapshot 1 after 2", tableHolds(t, s), state2)

	// Snapshot 3, interrupted after 3 batches (a hook between two
	// batches), then retried whole.
	fill(0, 20, 60, "three")
	fill(0, 120, 140, "three")
	if err := srv.Pipeline(ctx, func(w *bufio.Writer) error {
		for i := 0; i < 10; i++ {
			redisproc.WriteCommand(w, "DEL", fmt.Sprintf("k:%03d", i))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	state3 := redisHolds(t, srv, 0, 3)
	snap3 := saveSnapshot(t, srv)
	gen3 := strconv.FormatInt(int64(gen1)+20, 10)
	interrupted := errors.New("interrupted by the test")
	rdbStateBatchHook = func(stored int) error {
		if stored == 3 {
			return interrupted
		}
		return nil
	}
	code, res = ingestState(snap3, "generation="+gen3)
	rdbStateBatchHook = nil
	if code == 200 || res["accepted"] != 30.0 {
		t.Fatalf("snapshot 3 interrupted: %d %v, want an error after 30 rows", code, res)
	}
	// A mix: some of snapshot 3's changes are there, and nothing was
	// deleted yet (the keys snapshot 3 removed are still there).
	mixed := tableHolds(t, s)
	changed := 0
	for k, v := range state3 {
		if mixed[k] == v && state2[k] != v {
			changed++
		}
	}
	if changed == 0 || mixed["0/k:000"] != state2["0/k:000"] {
		t.Fatalf("after the interruption: %d of snapshot 3's changes, k:000 %q (want snapshot 2's %q)", changed, mixed["0/k:000"], state2["0/k:000"])
	}
	// The interrupted snapshot's generation was recorded before its
	// first batch: snapshot 2 now is older, even though 3 never finished.
	if code, res := ingestState(snap2, "generation="+gen2); code != 409 {
		t.Fatalf("snapshot 2 after 3 was interrupted: %d %v, want 409", code, res)
	}
	code, res = ingestState(snap3, "generation="+gen3)
	if code != 200 || res["deleted"] != 10.0 {
		t.Fatalf("snapshot 3 retried: %d %v, want 10 keys deleted", code, res)
	}
	sameState(t, "snapshot 3 after an interrupted ingest", tableHolds(t, s), state3)

	// Snapshot 2's file given snapshot 3's generation: another snapshot of
	// a generation already made whole, refused (409) by its checksum.
	code, res = ingestState(snap2, "generation="+gen3)
	if msg, _ := res["error"].(string); code != 409 || !strings.Contains(msg, "same generation") {
		t.Fatalf("another snapshot with generation %s: %d %v, want 409", gen3, code, res)
	}

	// An empty snapshot: the table ends empty.
	if _, err := srv.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	snap4 := saveSnapshot(t, srv)
	// A snapshot of which no key is selected still has its generation (its
	// ctime) checked: older than the test's generations.
	if code, res := ingestState(snap4, "db=5"); code != 409 {
		t.Fatalf("a snapshot with no key selected, generation its ctime: %d %v, want 409", code, res)
	}
	code, res = ingestState(snap4, "generation="+strconv.FormatInt(int64(gen1)+30, 10))
	if code != 200 || res["deleted"] != float64(len(state3)) {
		t.Fatalf("empty snapshot: %d %v, want %d deleted", code, res, len(state3))
	}
	sameState(t, "empty snapshot", tableHolds(t, s), map[string]string{})

	// An append-only table refuses mode=state.
	code, res = postRDB(t, s.url+"/v1/tables/plain/rows?mode=state", bytes.NewReader(snap1))
	if msg, _ := res["error"].(string); code != 400 || !strings.Contains(msg, "primary key") {
		t.Fatalf("mode=state into an append-only table: %d %v, want 400 naming the primary key", code, res)
	}
}
