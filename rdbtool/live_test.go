package rdbtool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/sluicedb/sluice/internal/rdbcorpus"
	"github.com/sluicedb/sluice/internal/redisproc"
	"github.com/sluicedb/sluice/rdb"
)

// liveCorpus is a small corpus made by a real redis-server (the benchmark
// generator at 3 MB), with the server kept running so tests can ask it what
// it holds. Shared by the tests of this file; made once.
var liveCorpus struct {
	once sync.Once
	path string
	srv  *redisproc.Server
	err  error
}

// withLiveServer gives the corpus path and the server that wrote it, or
// skips when redis-server is not installed.
func withLiveServer(t *testing.T) (string, *redisproc.Server) {
	t.Helper()
	redisproc.Need(t)
	liveCorpus.once.Do(func() {
		dir, err := os.MkdirTemp("", "rdbtool-live-*")
		if err != nil {
			liveCorpus.err = err
			return
		}
		srv, err := redisproc.Start(context.Background(), "", dir)
		if err != nil {
			liveCorpus.err = err
			return
		}
		g := rdbcorpus.NewGenerator(7)
		err = srv.Pipeline(context.Background(), func(w *bufio.Writer) error {
			for _, db := range []string{"0", "2"} {
				redisproc.WriteCommand(w, "SELECT", db)
				g.Fill(w, 1<<20)
			}
			// A few keys the mix does not have: empty-ish and odd values.
			redisproc.WriteCommand(w, "SELECT", "0")
			redisproc.WriteCommand(w, "SET", "empty", "")
			redisproc.WriteCommand(w, "SET", "ctl\x00\x01\"\\", "\xff\xfe not utf-8")
			redisproc.WriteCommand(w, "ZADD", "zinf", "inf", "a", "-inf", "b", "0.1", "c")
			// A value bigger than an export tape (parallel hand-over mid-value).
			big := []string{"RPUSH", "biglist"}
			for i := 0; i < 30000; i++ {
				big = append(big, fmt.Sprintf("item %d \"quoted\" ünïcode", i))
			}
			redisproc.WriteCommand(w, big...)
			// Values over bigString, escaped in pieces (parse side in the
			// parallel mode): text with escapes and runes on every piece
			// boundary somewhere, invalid UTF-8 (base64), and elements of
			// each collection type.
			huge := strings.Repeat("ünï \"q\"\t\x01 日本 🙂 text ", 20000)
			redisproc.WriteCommand(w, "SET", "huge:text", huge)
			redisproc.WriteCommand(w, "SET", "huge:binary", "\xff\xfe"+huge[:150001])
			redisproc.WriteCommand(w, "RPUSH", "huge:list", "a", huge[:100003], "b")
			redisproc.WriteCommand(w, "SADD", "huge:set", "a", huge[:90001])
			redisproc.WriteCommand(w, "ZADD", "huge:zset", "1.5", huge[:80009], "2", "b")
			redisproc.WriteCommand(w, "HSET", "huge:hash", huge[:70001], "v", "f", "\xff"+huge[:200000])
			return nil
		})
		if err == nil {
			var dump string
			if dump, err = srv.Save(); err == nil {
				liveCorpus.path = filepath.Join(dir, "corpus.rdb")
				err = os.Rename(dump, liveCorpus.path)
			}
		}
		liveCorpus.srv, liveCorpus.err = srv, err
	})
	if liveCorpus.err != nil {
		t.Fatal(liveCorpus.err)
	}
	return liveCorpus.path, liveCorpus.srv
}

// stopLiveServer is called from TestMain's cleanup path (see main_test).
func stopLiveServer() {
	if liveCorpus.srv != nil {
		liveCorpus.srv.Close()
		os.RemoveAll(liveCorpus.srv.Dir())
	}
}

// jsonBytes is the fixture BYTES form of b, built independently of
// appendString (Go's utf8.Valid and base64), for comparing decoded exports.
func jsonBytes(b []byte) any {
	if utf8.Valid(b) {
		return string(b)
	}
	return map[string]any{"base64": base64.StdEncoding.EncodeToString(b)}
}

func bulk(v any) []byte {
	b, _ := v.([]byte)
	return b
}

// serverRecord asks the server for key in db and returns a record in the
// export's JSON shape (as encoding/json would decode it), built only from
// the server's replies.
func serverRecord(t *testing.T, srv *redisproc.Server, db int, key []byte) map[string]any {
	t.Helper()
	do := func(args ...string) any {
		v, err := srv.Do(args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return v
	}
	k := string(key)
	typ := string(bulk(do("TYPE", k)))
	rec := map[string]any{"db": float64(db), "key": jsonBytes(key), "type": typ, "expire_at_ms": nil}
	if exp := do("PEXPIRETIME", k).(int64); exp >= 0 {
		rec["expire_at_ms"] = float64(exp)
	}
	list := func(v any) []any {
		var out []any
		for _, x := range v.([]any) {
			out = append(out, jsonBytes(bulk(x)))
		}
		return out
	}
	switch typ {
	case "string":
		rec["value"] = jsonBytes(bulk(do("GET", k)))
	case "list":
		rec["value"] = list(do("LRANGE", k, "0", "-1"))
	case "set":
		rec["value"] = list(do("SMEMBERS", k))
	case "zset":
		flat := do("ZRANGE", k, "0", "-1", "WITHSCORES").([]any)
		var out []any
		for i := 0; i < len(flat); i += 2 {
			out = append(out, map[string]any{"member": jsonBytes(bulk(flat[i])), "score": string(bulk(flat[i+1]))})
		}
		rec["value"] = out
	case "hash":
		flat := do("HGETALL", k).([]any)
		var out []any
		for i := 0; i < len(flat); i += 2 {
			out = append(out, map[string]any{"field": jsonBytes(bulk(flat[i])), "value": jsonBytes(bulk(flat[i+1]))})
		}
		rec["value"] = out
	case "stream":
		var entries []any
		for _, e := range do("XRANGE", k, "-", "+").([]any) {
			e := e.([]any)
			var fields []any
			fl := e[1].([]any)
			for i := 0; i < len(fl); i += 2 {
				fields = append(fields, []any{jsonBytes(bulk(fl[i])), jsonBytes(bulk(fl[i+1]))})
			}
			entries = append(entries, map[string]any{"id": string(bulk(e[0])), "fields": fields})
		}
		info := do("XINFO", "STREAM", k).([]any)
		s := map[string]any{"entries": entries, "groups": []any{}}
		for i := 0; i < len(info); i += 2 {
			switch string(bulk(info[i])) {
			case "length":
				s["length"] = float64(info[i+1].(int64))
			case "last-generated-id":
				s["last_id"] = string(bulk(info[i+1]))
			}
		}
		rec["value"] = s
	default:
		t.Fatalf("key %q: unexpected type %q", key, typ)
	}
	return rec
}

// allServerKeys lists every key of the dbs with SCAN.
func allServerKeys(t *testing.T, srv *redisproc.Server, dbs ...int) map[int][][]byte {
	t.Helper()
	out := map[int][][]byte{}
	for _, db := range dbs {
		if _, err := srv.Do("SELECT", strconv.Itoa(db)); err != nil {
			t.Fatal(err)
		}
		cursor := "0"
		for {
			v, err := srv.Do("SCAN", cursor, "COUNT", "1000")
			if err != nil {
				t.Fatal(err)
			}
			parts := v.([]any)
			cursor = string(bulk(parts[0]))
			for _, k := range parts[1].([]any) {
				out[db] = append(out[db], bulk(k))
			}
			if cursor == "0" {
				break
			}
		}
	}
	return out
}

func TestExportMatchesLiveServer(t *testing.T) {
	path, srv := withLiveServer(t)
	got := exportRecords(t, path, JSONLines, Options{})
	var want []map[string]any
	keys := allServerKeys(t, srv, 0, 2)
	for _, db := range []int{0, 2} {
		if _, err := srv.Do("SELECT", strconv.Itoa(db)); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys[db] {
			want = append(want, serverRecord(t, srv, db, k))
		}
	}
	t.Logf("%d keys compared with the server", len(want))
	if len(want) < 1000 {
		t.Fatalf("corpus too small: %d keys", len(want))
	}
	// The server's stream view here has no group details: compare entries,
	// length and last ID.
	for _, r := range got {
		if r["type"] == "stream" {
			v := r["value"].(map[string]any)
			r["value"] = map[string]any{"entries": v["entries"], "length": v["length"], "last_id": v["last_id"], "groups": []any{}}
		}
	}
	compareRecords(t, "live", want, got)
}

// TestFiltersMatchServer checks every filter against the key lists the
// server gives (SCAN, TYPE), not against our own output.
func TestFiltersMatchServer(t *testing.T) {
	path, srv := withLiveServer(t)
	keys := allServerKeys(t, srv, 0, 2)
	type srvKey struct {
		db  int
		key string
		typ string
	}
	var all []srvKey
	for _, db := range []int{0, 2} {
		srv.Do("SELECT", strconv.Itoa(db))
		for _, k := range keys[db] {
			v, err := srv.Do("TYPE", string(k))
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, srvKey{db, string(k), string(bulk(v))})
		}
	}
	expect := func(keep func(k srvKey) bool) []string {
		var out []string
		for _, k := range all {
			if keep(k) {
				out = append(out, string(appendKeyLine(nil, []byte(k.key))))
			}
		}
		sort.Strings(out)
		return out
	}
	run := func(name string, f Filter, want []string) {
		t.Helper()
		var buf bytes.Buffer
		st, err := Keys(context.Background(), path, &buf, Options{Filter: f})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := strings.SplitAfter(buf.String(), "\n")
		got = got[:len(got)-1]
		sort.Strings(got)
		if len(want) == 0 {
			t.Fatalf("%s: the filter selects nothing on the server: a test that cannot fail", name)
		}
		if strings.Join(got, "") != strings.Join(want, "") || st.Keys != int64(len(want)) {
			t.Errorf("%s: got %d keys, want %d", name, len(got), len(want))
		}
	}
	run("db 2", Filter{DBs: []int{2}}, expect(func(k srvKey) bool { return k.db == 2 }))
	run("type hash,zset", Filter{Types: mustTypes(t, "hash", "zset")}, expect(func(k srvKey) bool { return k.typ == "hash" || k.typ == "zset" }))
	run("prefix user:", Filter{Prefixes: []string{"user:", "log:"}}, expect(func(k srvKey) bool {
		return strings.HasPrefix(k.key, "user:") || strings.HasPrefix(k.key, "log:")
	}))
	run("pattern", Filter{Pattern: "counter:*1"}, expect(func(k srvKey) bool {
		return strings.HasPrefix(k.key, "counter:") && strings.HasSuffix(k.key, "1")
	}))
	run("regex", Filter{Regex: `^(session|tags):\d*7$`}, expect(func(k srvKey) bool {
		return (strings.HasPrefix(k.key, "session:") || strings.HasPrefix(k.key, "tags:")) && strings.HasSuffix(k.key, "7")
	}))
	run("db 0 + type list + prefix queue:", Filter{DBs: []int{0}, Types: mustTypes(t, "list"), Prefixes: []string{"queue:"}},
		expect(func(k srvKey) bool { return k.db == 0 && k.typ == "list" && strings.HasPrefix(k.key, "queue:") }))

	// MinSize against the server's MEMORY USAGE: the keys it keeps must be
	// the big ones. The estimate is not MEMORY USAGE, so check the ordering
	// property with a margin: every key the server puts above 200 KB is
	// kept at --min-size 100000, and no key under 20 KB is.
	var buf bytes.Buffer
	if _, err := Keys(context.Background(), path, &buf, Options{Filter: Filter{MinSize: 100000}}); err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		kept[l+"\n"] = true
	}
	var big int
	for _, k := range all {
		srv.Do("SELECT", strconv.Itoa(k.db))
		v, err := srv.Do("MEMORY", "USAGE", k.key, "SAMPLES", "0")
		if err != nil {
			t.Fatal(err)
		}
		usage := v.(int64)
		line := appendKeyLine(nil, []byte(k.key))
		switch {
		case usage > 200000:
			big++
			if !kept[string(line)] {
				t.Errorf("--min-size 100000 dropped %q (db %d), MEMORY USAGE %d", k.key, k.db, usage)
			}
		case usage < 20000 && kept[string(line)]:
			t.Errorf("--min-size 100000 kept %q (db %d), MEMORY USAGE %d", k.key, k.db, usage)
		}
	}
	if big == 0 {
		t.Error("no key above 200 KB on the server: the MinSize check tested nothing")
	}
}

func mustTypes(t *testing.T, names ...string) []rdb.Type {
	t.Helper()
	var out []rdb.Type
	for _, n := range names {
		typ, err := ParseType(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, typ)
	}
	return out
}

// TestMemoryEstimateTracksServer compares the estimate with the server's
// MEMORY USAGE key by key: an estimate, so within a factor of two for nine
// keys in ten, and in the same order for clearly different sizes.
func TestMemoryEstimateTracksServer(t *testing.T) {
	path, srv := withLiveServer(t)
	type pair struct {
		key       string
		est, real int64
	}
	var pairs []pair
	encodings := map[string]int{}
	wrongEnc := 0
	_, err := scanMemory(context.Background(), path, Options{}, func(r *MemoryRecord) error {
		srv.Do("SELECT", strconv.Itoa(r.DB))
		v, err := srv.Do("MEMORY", "USAGE", string(r.Key), "SAMPLES", "0")
		if err != nil {
			return fmt.Errorf("MEMORY USAGE %q: %w", r.Key, err)
		}
		pairs = append(pairs, pair{string(r.Key), r.Bytes, v.(int64)})
		enc, err := srv.Do("OBJECT", "ENCODING", string(r.Key))
		if err != nil {
			return err
		}
		encodings[string(bulk(enc))]++
		if string(bulk(enc)) != r.Encoding {
			wrongEnc++
			if wrongEnc <= 5 {
				t.Errorf("%q: encoding %s, the server says %s", r.Key, r.Encoding, bulk(enc))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The generator's mix covers every in-memory encoding of Redis 7.0.
	for _, want := range []string{"int", "embstr", "raw", "listpack", "quicklist", "intset", "hashtable", "skiplist", "stream"} {
		if encodings[want] == 0 {
			t.Errorf("the corpus has no key with encoding %s (server's OBJECT ENCODING): %v", want, encodings)
		}
	}
	off := 0
	for _, p := range pairs {
		if p.est*2 < p.real || p.est > p.real*2 {
			off++
			if off <= 5 {
				t.Logf("estimate %d vs MEMORY USAGE %d for %q", p.est, p.real, p.key)
			}
		}
	}
	within := 0
	for _, p := range pairs {
		if r := float64(p.est) / float64(p.real); r >= 0.8 && r <= 1.25 {
			within++
		}
	}
	t.Logf("%d keys: %d estimates within 0.8-1.25x of MEMORY USAGE, %d off by more than 2x", len(pairs), within, off)
	if off*10 > len(pairs) {
		t.Errorf("%d of %d estimates off by more than 2x from MEMORY USAGE", off, len(pairs))
	}
}
