package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/internal/rdbfixture"
	"github.com/sluicedb/sluice/rdbtool"
	"github.com/sluicedb/sluice/table"
)

// rdbConfig has a table of key rows with a filter and computed columns over
// them: one reads the JSON value (the first item of lists).
const rdbConfig = `
listen: {http: "127.0.0.1:0"}
limits: {max_body_bytes: 4096, read_timeout: 5s}
tables:
  - name: keys
    hashBy: db
    filters:
      - name: no_streams
        func: "function main(row) return row.type ~= 'stream' end"
    computed:
      - name: kb
        type: int64
        func: "function main(row) return math.floor(row.memory_bytes / 1024) end"
      - name: prefix
        type: string
        func: "function main(row) return (string.match(row.key, '^[^:]*')) end"
      - name: first_item
        type: string
        func: |
          local json = require("json")
          function main(row)
            if row.type ~= "list" then return nil end
            local v = json.decode(row.value)
            if type(v[1]) == "string" then return v[1] end
            return nil
          end
`

const rdbFixtureName = "redis-7.0.15"

func postRDB(t *testing.T, url string, body io.Reader) (int, map[string]any) {
	t.Helper()
	code, m, _ := post(t, url, ingest.RDBContentType, body)
	return code, m
}

func queryAll(t *testing.T, s *testServer, table, params string) []map[string]any {
	t.Helper()
	code, body := get(t, s.url+"/v1/tables/"+table+"/query?"+params)
	if code != 200 {
		t.Fatalf("query: %d %s", code, body)
	}
	return lines(body)
}

// TestRDBOverHTTP posts a real-server snapshot as application/x-redis-rdb
// with parser filters as query parameters and checks, against the
// server's own list of keys, that the table holds one row per selected key
// with the table's filter and computed columns applied.
func TestRDBOverHTTP(t *testing.T) {
	s := startServer(t, rdbConfig, "")
	fx, err := rdbfixture.Load(rdbFixtureName)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(rdbfixture.Path(rdbFixtureName))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) <= 4096 {
		t.Fatal("the fixture must be larger than max_body_bytes for this test")
	}
	// db 0, lists, strings and streams (streams then dropped by the table's
	// filter), in batches of 4.
	code, res := postRDB(t, s.url+"/v1/tables/keys/rows?db=0&type=list,string,stream&batch=4", bytes.NewReader(data))
	var want []string
	streams := 0
	lists := map[string]string{}
	for _, k := range fx.Keys {
		if k.DB != 0 {
			continue
		}
		switch k.Type {
		case "stream":
			streams++
		case "list", "string":
			want = append(want, k.Key)
		}
		if k.Type == "list" {
			var items []json.RawMessage
			if err := json.Unmarshal(k.Value, &items); err != nil {
				t.Fatal(err)
			}
			first := ""
			if len(items) > 0 {
				first, _ = rdbfixture.Bytes(items[0])
			}
			lists[k.Key] = first
		}
	}
	if code != 200 || res["accepted"] != float64(len(want)) || res["filtered"] != float64(streams) || res["keys"] != float64(len(want)+streams) {
		t.Fatalf("answer %d %v: want %d accepted, %d filtered", code, res, len(want), streams)
	}
	if res["batches"] != math.Ceil(float64(len(want)+streams)/4) || res["bytes"] != float64(len(data)) {
		t.Errorf("batches %v, bytes %v", res["batches"], res["bytes"])
	}
	rows := queryAll(t, s, "keys", "")
	var got []string
	for _, r := range rows {
		key := r["key"].(string)
		if b64, ok := r["key_base64"].(string); ok {
			raw, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				t.Fatal(err)
			}
			key = string(raw)
		}
		got = append(got, key)
		if r["db"] != 0.0 || (r["type"] != "list" && r["type"] != "string") {
			t.Errorf("row %v passed the filters", r)
		}
		if mb := r["memory_bytes"].(float64); r["kb"] != math.Floor(mb/1024) {
			t.Errorf("key %q: kb %v for memory_bytes %v", key, r["kb"], mb)
		}
		if p := strings.SplitN(key, ":", 2)[0]; utf8OK(p) && r["prefix"] != p {
			t.Errorf("key %q: prefix %v", key, r["prefix"])
		}
		if first, isList := lists[key]; isList && utf8OK(first) && r["first_item"] != first {
			t.Errorf("list %q: first_item %v, the server's first item %q", key, r["first_item"], first)
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("keys stored\n got  %q\n want %q", got, want)
	}
}

func utf8OK(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// TestRDBOverHTTPTruncated posts a snapshot cut short with mode=stream: 400
// with the offset and key, and exactly the complete batches before the cut
// stored.
func TestRDBOverHTTPTruncated(t *testing.T) {
	s := startServer(t, rdbConfig, "")
	data, err := os.ReadFile(rdbfixture.Path(rdbFixtureName))
	if err != nil {
		t.Fatal(err)
	}
	cut := data[:len(data)*2/3]
	code, res := postRDB(t, s.url+"/v1/tables/keys/rows?batch=5&mode=stream", bytes.NewReader(cut))
	msg, _ := res["error"].(string)
	if code != 400 || !strings.Contains(msg, "truncated") || res["offset"] == nil || res["key"] == nil || res["key"] == "" {
		t.Fatalf("answer %d %v: want 400 naming offset and key", code, res)
	}
	if !regexp.MustCompile(`request body: rdb: key ".+" at offset \d+`).MatchString(msg) {
		t.Errorf("error %q does not name the body, key and offset", msg)
	}
	stored := len(queryAll(t, s, "keys", ""))
	accepted, filtered := int(res["accepted"].(float64)), int(res["filtered"].(float64))
	if stored == 0 || stored != accepted || (accepted+filtered)%5 != 0 {
		t.Errorf("stored %d rows, answer %v: want the complete batches of 5 stored", stored, res)
	}
	if res["failed"].(float64) <= 0 || res["mode"] != "stream" {
		t.Errorf("the unfinished batch's rows are not counted as failed, or the mode is not stream: %v", res)
	}
}

// TestRDBOverHTTPAllOrNothing: by default a snapshot is stored whole or not
// at all. A real server's snapshot cut short, and one with a byte of a value
// flipped (readable to its end, refused by its CRC64), get a 400 and store
// nothing, though many batches of them were read; the good snapshot posted
// after them stores each key once. Before, each failed try kept the batches
// read before the failure, and the retry stored them again.
func TestRDBOverHTTPAllOrNothing(t *testing.T) {
	s := startServer(t, rdbConfig, "")
	fx, err := rdbfixture.Load(rdbFixtureName)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(rdbfixture.Path(rdbFixtureName))
	if err != nil {
		t.Fatal(err)
	}
	flipped, err := fx.FlipInValue(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		name, want string
		body       []byte
	}{{"truncated", "truncated", data[:len(data)*2/3]}, {"flipped byte", "checksum mismatch", flipped}} {
		code, res := postRDB(t, s.url+"/v1/tables/keys/rows?batch=5", bytes.NewReader(bad.body))
		msg, _ := res["error"].(string)
		if code != 400 || !strings.Contains(msg, bad.want) || !strings.Contains(msg, "nothing of the snapshot was stored") {
			t.Fatalf("%s: answer %d %v", bad.name, code, res)
		}
		if res["mode"] != "atomic" || res["accepted"] != 0.0 || res["batches"].(float64) < 3 {
			t.Errorf("%s: answer %v: want mode atomic, 0 accepted after several batches", bad.name, res)
		}
		if n := len(queryAll(t, s, "keys", "")); n != 0 {
			t.Fatalf("%s: %d rows stored", bad.name, n)
		}
	}
	code, res := postRDB(t, s.url+"/v1/tables/keys/rows?batch=5", bytes.NewReader(data))
	want := 0
	for _, k := range fx.Keys {
		if k.Type != "stream" { // the table's filter drops streams
			want++
		}
	}
	if code != 200 || res["mode"] != "atomic" || res["accepted"] != float64(want) {
		t.Fatalf("good snapshot: answer %d %v, want %d accepted", code, res, want)
	}
	seen := map[string]int{}
	for _, r := range queryAll(t, s, "keys", "") {
		seen[fmt.Sprint(r["db"], r["key"], r["key_base64"])]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("key %s stored %d times", k, n)
		}
	}
	if len(seen) != want {
		t.Errorf("%d keys stored, want %d", len(seen), want)
	}
}

// TestRDBOverHTTPStreamed sends the first half of a snapshot and checks
// that rows are stored while the request is still open: the body is
// parsed as it arrives, not read whole first.
func TestRDBOverHTTPStreamed(t *testing.T) {
	s := startServer(t, rdbConfig, "")
	data, err := os.ReadFile(rdbfixture.Path(rdbFixtureName))
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	type answer struct {
		code int
		res  map[string]any
	}
	done := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", s.url+"/v1/tables/keys/rows?batch=2&mode=stream", pr)
		req.Header.Set("Content-Type", ingest.RDBContentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{code: -1, res: map[string]any{"error": err.Error()}}
			return
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		done <- answer{resp.StatusCode, m}
	}()
	if _, err := pw.Write(data[:len(data)/2]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(queryAll(t, s, "keys", "")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no row stored while the first half of the snapshot was sent")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case a := <-done:
		t.Fatalf("answered before the body ended: %v", a)
	default:
	}
	pw.Write(data[len(data)/2:])
	pw.Close()
	a := <-done
	if a.code != 200 || a.res["bytes"] != float64(len(data)) {
		t.Fatalf("answer %d %v", a.code, a.res)
	}
}

// TestRDBOverHTTPCorruptEarly: a snapshot that fails early in a large
// body gets its 400 while the client is still sending (the server reads
// and drops the rest), not a reset connection; in stream mode the batches
// before the failure are stored.
func TestRDBOverHTTPCorruptEarly(t *testing.T) {
	s := startServer(t, rdbConfig, "")
	data, err := os.ReadFile(rdbfixture.Path(rdbFixtureName))
	if err != nil {
		t.Fatal(err)
	}
	// A type byte no RDB has, after the fixture's first keys, then 32 MiB.
	cut := len(data) / 2
	body := append(bytes.Clone(data[:cut]), 0xEE)
	body = append(body, make([]byte, 32<<20)...)
	c := &Client{URL: s.url}
	res, err := c.PostRDB(context.Background(), "keys", bytes.NewReader(body), ingest.RDBOptions{BatchRows: 1, Stream: true})
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 400 || !strings.Contains(se.Body, "offset") {
		t.Fatalf("PostRDB: %v", err)
	}
	if res.Accepted+res.Filtered == 0 || res.Accepted != len(queryAll(t, s, "keys", "")) {
		t.Errorf("result %+v: want the keys before the bad byte stored", res)
	}
}

// TestRDBClientFilters: the client sends the filters as query parameters
// and the server applies them (prefix and min-size here), and a bad
// parameter is a 400 before anything is read.
func TestRDBClientFilters(t *testing.T) {
	s := startServer(t, rdbConfig, "")
	f, err := os.Open(rdbfixture.Path(rdbFixtureName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := &Client{URL: s.url}
	opts := ingest.RDBOptions{Filter: rdbtool.Filter{Prefixes: []string{"set:", "hash:"}, MinSize: 500}}
	res, err := c.PostRDB(context.Background(), "keys", f, opts)
	if err != nil {
		t.Fatal(err)
	}
	rows := queryAll(t, s, "keys", "")
	if res.Accepted == 0 || len(rows) != res.Accepted {
		t.Fatalf("result %+v, %d rows", res, len(rows))
	}
	for _, r := range rows {
		k := r["key"].(string)
		if (!strings.HasPrefix(k, "set:") && !strings.HasPrefix(k, "hash:")) || r["memory_bytes"].(float64) < 500 {
			t.Errorf("row %q (%v bytes) passed the filters", k, r["memory_bytes"])
		}
	}
	code, m := postRDB(t, s.url+"/v1/tables/keys/rows?db=x&colour=red&mode=partly", strings.NewReader("REDIS0010"))
	if msg, _ := m["error"].(string); code != 400 || !strings.Contains(msg, "colour") || !strings.Contains(msg, `db "x"`) || !strings.Contains(msg, `mode "partly"`) {
		t.Errorf("bad parameters: %d %v", code, m)
	}
}

// TestRDBOverHTTPLongerThanReadTimeout: an upload that takes longer than
// read_timeout in all, but never stalls that long, is read to the end (the
// read deadline moves on as bytes arrive).
func TestRDBOverHTTPLongerThanReadTimeout(t *testing.T) {
	s := startServer(t, strings.Replace(rdbConfig, "read_timeout: 5s", "read_timeout: 1s", 1), "")
	data, err := os.ReadFile(rdbfixture.Path(rdbFixtureName))
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		step := len(data)/5 + 1
		for i := 0; i < len(data); i += step {
			pw.Write(data[i:min(i+step, len(data))])
			time.Sleep(400 * time.Millisecond) // 2 s in all, 0.4 s at most without a byte
		}
		pw.Close()
	}()
	start := time.Now()
	code, res := postRDB(t, s.url+"/v1/tables/keys/rows", pr)
	if code != 200 || res["bytes"] != float64(len(data)) {
		t.Fatalf("answer %d %v", code, res)
	}
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Fatalf("the upload took %s: not longer than read_timeout, the test proves nothing", took)
	}
}

// TestRDBClientRetriesWhenBusy: with every ingest slot taken, PostRDB gets
// 429 before sending the body (Expect: 100-continue), rewinds the file,
// retries after Retry-After, and the snapshot is stored once, whole.
func TestRDBClientRetriesWhenBusy(t *testing.T) {
	s := startServer(t, strings.Replace(rdbConfig, "limits: {", "limits: {max_inflight: 1, ", 1), "")
	// Hold the only slot with a half-sent RDB body.
	data, err := os.ReadFile(rdbfixture.Path(rdbFixtureName))
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	held := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", s.url+"/v1/tables/keys/rows?db=15", pr)
		req.Header.Set("Content-Type", ingest.RDBContentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			held <- -1
			return
		}
		resp.Body.Close()
		held <- resp.StatusCode
	}()
	pw.Write(data[:100])
	for i := 0; s.queue.Len() == 0; i++ {
		if i > 500 {
			t.Fatal("slot never taken")
		}
		time.Sleep(5 * time.Millisecond)
	}
	f, err := os.Open(rdbfixture.Path(rdbFixtureName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type answer struct {
		res RDBResult
		err error
	}
	done := make(chan answer, 1)
	counted := &countingReadSeeker{r: f}
	go func() {
		c := &Client{URL: s.url}
		res, err := c.PostRDB(context.Background(), "keys", counted, ingest.RDBOptions{Filter: rdbtool.Filter{DBs: []int{0}}})
		done <- answer{res, err}
	}()
	// Let the client meet the full queue, then free the slot.
	for i := 0; s.throttled.Load() == 0; i++ {
		if i > 1000 {
			t.Fatal("the client was never throttled")
		}
		time.Sleep(5 * time.Millisecond)
	}
	pw.Write(data[100:])
	pw.Close()
	if code := <-held; code != 200 {
		t.Fatalf("held request: %d", code)
	}
	a := <-done
	if a.err != nil {
		t.Fatalf("PostRDB after a 429: %v", a.err)
	}
	fx, err := rdbfixture.Load(rdbFixtureName)
	if err != nil {
		t.Fatal(err)
	}
	db0 := 0
	for _, k := range fx.Keys {
		if k.DB == 0 {
			db0++
		}
	}
	if a.res.Keys != int64(db0) || a.res.Bytes != int64(len(data)) {
		t.Fatalf("result %+v: want the %d keys of db 0 read from the whole file", a.res, db0)
	}
	if stored := len(queryAll(t, s, "keys", "where=db=0")); stored != a.res.Accepted {
		t.Errorf("%d rows of db 0 stored, %d accepted: stored twice or not at all", stored, a.res.Accepted)
	}
	// 100-continue: nothing of the file was sent with the refused attempt.
	if counted.n != int64(len(data)) {
		t.Errorf("the file was read for %d bytes, want %d: the refused attempt sent its body", counted.n, len(data))
	}
}

type countingReadSeeker struct {
	r io.ReadSeeker
	n int64
}

func (c *countingReadSeeker) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReadSeeker) Seek(off int64, whence int) (int64, error) { return c.r.Seek(off, whence) }

// TestRDBValuesStoredAsDecoded checks that the value JSON the table stores
// without checking it again (table.TrustJSON) is byte for byte the JSON
// rdbtool wrote, and valid, for every key of a real-server snapshot, in a
// table with an inferred schema and one with a static schema.
func TestRDBValuesStoredAsDecoded(t *testing.T) {
	schema := "    schema:\n"
	for _, c := range ingest.RDBColumns {
		schema += "      - {name: " + c.Name + ", type: " + c.Type + "}\n"
	}
	s := startServer(t, "listen: {http: \"127.0.0.1:0\"}\ntables:\n  - name: inferred\n  - name: static\n"+schema, "")
	data, err := os.ReadFile(rdbfixture.Path(rdbFixtureName))
	if err != nil {
		t.Fatal(err)
	}
	type dbKey struct {
		db  int64
		key string
	}
	want := map[dbKey]string{}
	if _, err := ingest.DecodeRDB(context.Background(), bytes.NewReader(data), ingest.RDBOptions{}, func(rows []ingest.Row) error {
		for _, r := range rows {
			want[dbKey{r["db"].(int64), r["key"].(string)}] = string(r["value"].(json.RawMessage))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(want) < 50 {
		t.Fatalf("only %d keys decoded", len(want))
	}
	for _, name := range []string{"inferred", "static"} {
		res, err := s.IngestRDB(context.Background(), name, bytes.NewReader(data), ingest.RDBOptions{BatchRows: 7})
		if err != nil || res.Accepted != len(want) {
			t.Fatalf("%s: %+v, %v; want %d rows", name, res, err, len(want))
		}
		got := 0
		err = s.tables[name].table.Query(context.Background(), table.Query{}, func(r table.Row) error {
			k := dbKey{r["db"].(int64), r["key"].(string)}
			v, ok := r["value"].(json.RawMessage)
			switch {
			case !ok:
				t.Errorf("%s: key %q: value %T, want json.RawMessage", name, k.key, r["value"])
			case string(v) != want[k]:
				t.Errorf("%s: key %q (db %d): stored %.80s, decoded %.80s", name, k.key, k.db, v, want[k])
			case !json.Valid(v):
				t.Errorf("%s: key %q: stored value is not valid JSON: %.80s", name, k.key, v)
			}
			got++
			return nil
		})
		if err != nil || got != len(want) {
			t.Fatalf("%s: query: %d rows, %v; want %d", name, got, err, len(want))
		}
	}
}

// TestRDBTableDefaults posts a real-server snapshot to a table with an rdb:
// section and checks the keys each request selects, and its batches,
// against the section's and the request's filters combined as
// docs/rdb.md says (db, type, prefix, min_size narrow; regex, pattern,
// batch replace), and that a request asking for keys the section excludes
// is a 400 that stores nothing.
func TestRDBTableDefaults(t *testing.T) {
	s := startServer(t, `
listen: {http: "127.0.0.1:0"}
tables:
  - name: keys
    rdb:
      db: [0, 1]
      type: [string, list, hash]
      prefix: ["str:", "list:", "hash:"]
      regex: '^[a-z]+:[a-z]'
      min_size: 100
      batch: 3
`, "")
	data, err := os.ReadFile(rdbfixture.Path(rdbFixtureName))
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		db        int64
		typ, name string
		memory    int64
	}
	var all []key
	if _, err := ingest.DecodeRDB(context.Background(), bytes.NewReader(data), ingest.RDBOptions{}, func(rows []ingest.Row) error {
		for _, r := range rows {
			all = append(all, key{r["db"].(int64), r["type"].(string), r["key"].(string), r["memory_bytes"].(int64)})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The table's section, written out.
	table := func(k key) bool {
		return (k.db == 0 || k.db == 1) && (k.typ == "string" || k.typ == "list" || k.typ == "hash") &&
			(strings.HasPrefix(k.name, "str:") || strings.HasPrefix(k.name, "list:") || strings.HasPrefix(k.name, "hash:")) &&
			k.memory >= 100
	}
	lowerColonLower := regexp.MustCompile(`^[a-z]+:[a-z]`)
	stored := 0.0
	for _, c := range []struct {
		query string
		keep  func(key) bool
		batch int
	}{
		{"", func(k key) bool { return table(k) && lowerColonLower.MatchString(k.name) }, 3},
		{"db=0&type=list&prefix=list:p", func(k key) bool {
			return table(k) && k.db == 0 && k.typ == "list" && strings.HasPrefix(k.name, "list:p") && lowerColonLower.MatchString(k.name)
		}, 3},
		// A larger min_size narrows; a smaller one leaves the table's.
		{"min_size=5000&batch=100", func(k key) bool { return table(k) && k.memory >= 5000 && lowerColonLower.MatchString(k.name) }, 100},
		{"min_size=10", func(k key) bool { return table(k) && lowerColonLower.MatchString(k.name) }, 3},
		// The request's regex replaces the table's (which would refuse str:1...).
		{"regex=" + url.QueryEscape(`^str:(i|1)`), func(k key) bool { return table(k) && regexp.MustCompile(`^str:(i|1)`).MatchString(k.name) }, 3},
	} {
		want := 0
		for _, k := range all {
			if c.keep(k) {
				want++
			}
		}
		if want == 0 {
			t.Fatalf("%q: the fixture has no key to select", c.query)
		}
		code, res := postRDB(t, s.url+"/v1/tables/keys/rows?"+c.query, bytes.NewReader(data))
		if code != 200 || res["keys"] != float64(want) || res["accepted"] != float64(want) ||
			res["batches"] != math.Ceil(float64(want)/float64(c.batch)) {
			t.Errorf("%q: answer %d %v, want %d keys in batches of %d", c.query, code, res, want, c.batch)
		}
		stored += float64(want)
	}
	for _, c := range []struct{ query, says string }{
		{"db=3", "db 3: not among"},
		{"db=0,5", "db 5: not among"},
		{"type=set", "type set: not among"},
		{"prefix=s", `prefix "s": does not start with`},
		{"prefix=list:&prefix=zset:", `prefix "zset:"`},
	} {
		code, body, _ := post(t, s.url+"/v1/tables/keys/rows?"+c.query, ingest.RDBContentType, bytes.NewReader(data))
		if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body["error"]), c.says) {
			t.Errorf("%q: answer %d %v, want 400 saying %q", c.query, code, body, c.says)
		}
	}
	if rows := queryAll(t, s, "keys", ""); float64(len(rows)) != stored {
		t.Errorf("%d rows stored, want %v (the refused requests stored something?)", len(rows), stored)
	}
}

// TestRDBDeadLettersAllOrNothing: in atomic mode the rows a deadletter
// policy routes away are staged with the snapshot's rows: a snapshot cut
// short stores neither, the good one stores both.
func TestRDBDeadLettersAllOrNothing(t *testing.T) {
	const cfg = `
listen: {http: "127.0.0.1:0"}
tables:
  - name: keys
    computed:
      - name: checked
        type: bool
        on_error: deadletter
        func: |
          function main(row)
            if row.type == "zset" then error("no zsets here") end
            return true
          end
`
	s := startServer(t, cfg, "")
	fx, err := rdbfixture.Load(rdbFixtureName)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(rdbfixture.Path(rdbFixtureName))
	if err != nil {
		t.Fatal(err)
	}
	zsets := 0
	for _, k := range fx.Keys {
		if k.Type == "zset" {
			zsets++
		}
	}
	const dead = "/v1/tables/keys_deadletter/query?from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z"
	code, res := postRDB(t, s.url+"/v1/tables/keys/rows?batch=3", bytes.NewReader(data[:len(data)*9/10]))
	if code != 400 || res["mode"] != "atomic" {
		t.Fatalf("cut snapshot: %d %v", code, res)
	}
	if code, out := get(t, s.url+dead); code != 200 || len(lines(out)) != 0 {
		t.Fatalf("dead letters of a snapshot that failed: %d\n%s", code, out)
	}
	if n := len(queryAll(t, s, "keys", "")); n != 0 {
		t.Fatalf("%d rows of a snapshot that failed", n)
	}
	code, res = postRDB(t, s.url+"/v1/tables/keys/rows?batch=3", bytes.NewReader(data))
	if code != 200 || res["accepted"] != float64(len(fx.Keys)-zsets) {
		t.Fatalf("good snapshot: %d %v", code, res)
	}
	if code, out := get(t, s.url+dead); code != 200 || len(lines(out)) != zsets {
		t.Fatalf("dead letters of the good snapshot: %d, want %d\n%s", code, zsets, out)
	}
}
