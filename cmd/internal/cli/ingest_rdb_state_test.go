package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/redisproc"
)

const keyedKeysConfig = `
tables:
  - name: keys
    hashBy: db
    primary_key: [db, key]
`

// redisStrings reads every key of db 0 of srv (string keys only) with its
// value through the redis protocol.
func redisStrings(t *testing.T, srv *redisproc.Server) map[string]string {
	t.Helper()
	v, err := srv.Do("KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, k := range v.([]any) {
		keys = append(keys, string(k.([]byte)))
	}
	held := make(map[string]string, len(keys))
	for len(keys) > 0 {
		part := keys[:min(len(keys), 1000)]
		keys = keys[len(part):]
		v, err := srv.Do(append([]string{"MGET"}, part...)...)
		if err != nil {
			t.Fatal(err)
		}
		for i, val := range v.([]any) {
			held[part[i]] = string(val.([]byte))
		}
	}
	return held
}

// TestIngestRDBStateKill9 has a real redis-server write two snapshots of
// string keys (between them a third of the keys changed, a third deleted
// and new ones added), ingests the first with --mode state, kills
// (SIGKILL) `sluice ingest --mode state` of the second once it has written
// a few MB, then runs it again to its end: the table then holds exactly
// what redis held at the second SAVE, read through the redis protocol.
func TestIngestRDBStateKill9(t *testing.T) {
	redisproc.Need(t)
	bin := buildSluice(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	srv, err := redisproc.Start(ctx, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	const keys = 60_000
	set := func(from, to int, tag string) {
		t.Helper()
		if err := srv.Pipeline(ctx, func(w *bufio.Writer) error {
			var v strings.Builder
			for i := from; i < to; i++ {
				v.Reset()
				v.WriteString(tag)
				for j := range 18 {
					fmt.Fprintf(&v, "%016x", uint64(i+1)*0x9e3779b97f4a7c15^uint64(j)*0xbf58476d1ce4e5b9)
				}
				redisproc.WriteCommand(w, "SET", "key:"+strconv.Itoa(i), v.String())
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	save := func(name string) string {
		t.Helper()
		dump, err := srv.Save()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), name)
		if err := os.Rename(dump, path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	set(0, keys, "one")
	snap1 := save("1.rdb")
	set(0, keys/3, "two")
	if err := srv.Pipeline(ctx, func(w *bufio.Writer) error {
		for i := keys / 3; i < 2*keys/3; i++ {
			redisproc.WriteCommand(w, "DEL", "key:"+strconv.Itoa(i))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	set(keys, keys+keys/6, "two")
	want := redisStrings(t, srv)
	snap2 := save("2.rdb")

	cfg := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(cfg, []byte(keyedKeysConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	ingest := func(snapshot, generation string) map[string]any {
		t.Helper()
		out, err := exec.CommandContext(ctx, bin, "ingest", "--config", cfg, "--data", data, "--table", "keys", "--no-progress",
			"--mode", "state", "--generation", generation, snapshot).CombinedOutput()
		if err != nil {
			t.Fatalf("ingest %s: %v\n%s", snapshot, err, out)
		}
		return ingestReport(t, string(out))
	}
	if rep := ingest(snap1, "1"); rep["accepted"] != float64(keys) {
		t.Fatalf("snapshot 1: %v", rep)
	}
	logBytes := func() int64 {
		logs, _ := filepath.Glob(filepath.Join(data, "*.log"))
		var size int64
		for _, l := range logs {
			if st, err := os.Stat(l); err == nil {
				size += st.Size()
			}
		}
		return size
	}
	before := logBytes()
	killWhen(t, bin, cfg, data, snap2, "state", func() bool { return logBytes() > before+4<<20 }, "--generation", "2")
	rep := ingest(snap2, "2")
	if rep["deleted"] != float64(keys/3) {
		t.Fatalf("snapshot 2 after the kill: %v, want %d keys deleted", rep, keys/3)
	}

	out, err := exec.CommandContext(ctx, bin, "query", "--config", cfg, "--data", data, "--table", "keys", "--columns", "db,key,value").Output()
	if err != nil {
		t.Fatalf("sluice query: %v", err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r struct {
			DB    int64
			Key   string
			Value json.RawMessage
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("query line %q: %v", line, err)
		}
		var v string
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("key %s: value %s: %v", r.Key, r.Value, err)
		}
		if _, ok := got[r.Key]; ok || r.DB != 0 {
			t.Fatalf("key %q (db %d) twice or in another db", r.Key, r.DB)
		}
		got[r.Key] = v
	}
	bad := 0
	for k, v := range want {
		if got[k] != v {
			if bad++; bad <= 5 {
				t.Errorf("key %s: table %.20q, redis %.20q", k, got[k], v)
			}
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			if bad++; bad <= 5 {
				t.Errorf("key %s in the table, not in redis", k)
			}
		}
	}
	if bad > 0 || len(got) != len(want) {
		t.Fatalf("%d keys differ; the table has %d keys, redis %d", bad, len(got), len(want))
	}
}
