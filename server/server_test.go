package server

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/config"
)

const testConfig = `
listen: {http: "127.0.0.1:0"}
limits: {max_body_bytes: 4096, read_timeout: 2s}
tables:
  - name: events
    hashBy: user
    sortBy: ts
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
      - {name: note, type: string}
    on_bad_line: reject
    filters:
      - name: not_test
        func: "function main(row) return row.user ~= 'test' end"
    computed:
      - name: double
        type: int64
        func: "function main(row) return row.n * 2 end"
  - name: loose
    on_bad_line: skip
`

type testServer struct {
	*Server
	url  string
	stop func()
	logs *bytes.Buffer
}

// startServer runs a real server on a port the kernel picks and waits
// until it is ready.
func startServer(t *testing.T, yaml string, dir string) *testServer {
	t.Helper()
	ts := serveConfig(t, yaml, dir)
	waitReady(t, ts.url)
	return ts
}

// serveConfig starts a real server on a port the kernel picks and stops it
// when the test ends; it does not wait for the server to answer.
func serveConfig(t *testing.T, yaml string, dir string) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveConfigOn(t, yaml, dir, ln)
}

// serveConfigOn is serveConfig on a listener the caller made (a cluster's
// nodes know each other's addresses before they start).
func serveConfigOn(t testing.TB, yaml string, dir string, ln net.Listener) *testServer {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if dir == "" {
		dir = t.TempDir()
	}
	logs := &bytes.Buffer{}
	s, err := New(context.Background(), cfg, Options{StorageDir: dir, Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: logs}, nil))})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	ts := &testServer{Server: s, url: "http://" + ln.Addr().String(), logs: logs}
	stopped := false
	ts.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		http.DefaultClient.CloseIdleConnections()
	}
	t.Cleanup(ts.stop)
	return ts
}

func waitReady(t testing.TB, url string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("server never ready")
}

func post(t *testing.T, url, ctype string, body io.Reader, hdr ...string) (int, map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, body)
	req.Header.Set("Content-Type", ctype)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("response %d %q is not JSON: %v", resp.StatusCode, b, err)
	}
	return resp.StatusCode, m, resp.Header
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func lines(s string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func TestIngestAndQueryEndToEnd(t *testing.T) {
	s := startServer(t, testConfig, "")
	nd := `{"user":"ann","ts":"2024-05-01T10:00:00Z","n":1}
{"user":"bob","ts":"2024-05-01T11:00:00Z","n":2}
{"user":"test","ts":"2024-05-01T11:30:00Z","n":3}
{"user":"ann","ts":"2024-05-02T10:00:00Z","n":4}
`
	code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(nd))
	if code != 200 || res["accepted"] != 3.0 || res["filtered"] != 1.0 {
		t.Fatalf("ndjson ingest: %d %v", code, res)
	}
	// gzip'd CSV with a header.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, "user,ts,n,note\ncid,2024-05-01T12:00:00Z,5,\"a, quoted\"\n")
	zw.Close()
	code, res, _ = post(t, s.url+"/v1/tables/events/rows", "text/csv", &gz, "Content-Encoding", "gzip")
	if code != 200 || res["accepted"] != 1.0 {
		t.Fatalf("csv ingest: %d %v", code, res)
	}
	// A JSON array.
	code, res, _ = post(t, s.url+"/v1/tables/events/rows", "application/json", strings.NewReader(`[{"user":"dan","ts":1714557600,"n":6}]`))
	if code != 200 || res["accepted"] != 1.0 {
		t.Fatalf("json array ingest: %d %v", code, res)
	}

	// One partition, a time range, a projection: ann's rows on May 1st.
	code, body := get(t, s.url+"/v1/tables/events/query?hash=ann&from=2024-05-01T00:00:00Z&to=2024-05-02T00:00:00Z&columns=user,n,double")
	rows := lines(body)
	if code != 200 || len(rows) != 1 || rows[0]["n"] != 1.0 || rows[0]["double"] != 2.0 || rows[0]["ts"] != nil {
		t.Fatalf("partition query: %d %q", code, body)
	}
	// Every row, a predicate, CSV out.
	code, body = get(t, s.url+"/v1/tables/events/query?where=n>=2&format=csv&columns=user,n,note")
	want := "user,n,note\nbob,2,\ncid,5,\"a, quoted\"\nann,4,\ndan,6,\n"
	if code != 200 || !sameLines(body, want) {
		t.Fatalf("csv query: %d\n%s\nwant (any order)\n%s", code, body, want)
	}
	// POST query with IN and a limit.
	req := `{"where":[{"column":"user","op":"IN","values":["bob","dan"]}],"columns":["user"],"limit":5}`
	resp, err := http.Post(s.url+"/v1/tables/events/query", "application/json", strings.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := lines(string(b)); resp.StatusCode != 200 || len(got) != 2 {
		t.Fatalf("POST query: %d %s", resp.StatusCode, b)
	}
	// Describe endpoints.
	code, body = get(t, s.url+"/v1/tables/events/schema")
	if code != 200 || !strings.Contains(body, `"name":"double"`) || !strings.Contains(body, `"type":"int64"`) {
		t.Fatalf("schema: %d %s", code, body)
	}
	code, body = get(t, s.url+"/v1/tables")
	if code != 200 || !strings.Contains(body, `"name":"loose"`) || !strings.Contains(body, `"hashBy":"user"`) {
		t.Fatalf("tables: %d %s", code, body)
	}
	// Metrics.
	code, body = get(t, s.url+"/metrics")
	if code != 200 {
		t.Fatalf("metrics: %d %s", code, body)
	}
	for _, want := range []string{
		`sluice_ingest_rows_accepted_total{table="events"} 5`,
		`sluice_ingest_rows_filtered_total{table="events"} 1`,
		`sluice_compute_errors_total{column="double",filter="false",loader="lua",table="events"} 0`,
		"luavm_calls_total{script=", "sluice_store_size_bytes ", `sluice_table_size_bytes{table="events"} `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func sameLines(a, b string) bool {
	la, lb := strings.Split(strings.TrimSpace(a), "\n"), strings.Split(strings.TrimSpace(b), "\n")
	if len(la) != len(lb) || la[0] != lb[0] {
		return false
	}
	seen := map[string]int{}
	for _, l := range la {
		seen[l]++
	}
	for _, l := range lb {
		if seen[l]--; seen[l] < 0 {
			return false
		}
	}
	return true
}

func TestBadInput(t *testing.T) {
	s := startServer(t, testConfig, "")
	rowsURL := s.url + "/v1/tables/events/rows"
	ok := `{"user":"ann","ts":"2024-05-01T10:00:00Z","n":1}` + "\n"
	if code, res, _ := post(t, rowsURL, "application/x-ndjson", strings.NewReader(ok)); code != 200 {
		t.Fatalf("good batch: %d %v", code, res)
	}
	cases := []struct {
		name, url, ctype, body string
		code                   int
		want                   string
	}{
		{"malformed json line", rowsURL, "application/x-ndjson", ok + "{\"user\":\n" + ok, 400, `"line":2`},
		{"malformed csv line", rowsURL, "text/csv", "user,n\nann,1\n\"bob,2\n", 400, `"line":3`},
		{"unknown table", s.url + "/v1/tables/nope/rows", "application/x-ndjson", ok, 404, "unknown table"},
		{"value does not fit", rowsURL, "application/x-ndjson", ok + `{"user":"bob","n":"many"}` + "\n", 400, `"column":"n"`},
		{"oversized body", rowsURL, "application/x-ndjson", strings.Repeat(ok, 200), 413, "larger than 4096"},
		{"bad content type", rowsURL, "image/png", ok, 415, "unsupported"},
	}
	for _, c := range cases {
		code, res, _ := post(t, c.url, c.ctype, strings.NewReader(c.body))
		js, _ := json.Marshal(res)
		if code != c.code || !strings.Contains(string(js), c.want) {
			t.Errorf("%s: %d %s, want %d containing %s", c.name, code, js, c.code, c.want)
		}
	}
	// The schema error names the input row and line, counted before the
	// filter dropped the test user's row.
	testRow := `{"user":"test","n":1}` + "\n"
	_, res, _ := post(t, rowsURL, "application/x-ndjson", strings.NewReader(testRow+"\n"+ok+`{"user":"bob","n":"many"}`+"\n"))
	if res["row"] != 2.0 || res["line"] != 4.0 || res["column"] != "n" {
		t.Errorf("schema error at row %v line %v column %v, want row 2 line 4 column n", res["row"], res["line"], res["column"])
	}
	// Oversized after gzip decoding: small on the wire, large inflated.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, strings.Repeat(ok, 500))
	zw.Close()
	if gz.Len() >= 4096 {
		t.Fatalf("test body not small enough: %d", gz.Len())
	}
	if code, res, _ := post(t, rowsURL, "application/x-ndjson", &gz); code != 413 {
		t.Errorf("gzip bomb: %d %v", code, res)
	}
	// Skip policy: bad lines reported by number, the rest stored.
	code, res, _ := post(t, s.url+"/v1/tables/loose/rows", "application/x-ndjson", strings.NewReader("{\"a\":1}\nnot json\n{\"a\":2}\n"))
	if code != 200 || res["accepted"] != 2.0 || res["failed"] != 1.0 || !strings.Contains(fmt.Sprint(res["bad_lines"]), "line 2") {
		t.Errorf("skip policy: %d %v", code, res)
	}
	// Query errors.
	if code, body := get(t, s.url+"/v1/tables/events/query?columns=user,nosuch"); code != 400 || !strings.Contains(body, "nosuch") {
		t.Errorf("unknown column: %d %s", code, body)
	}
	if code, body := get(t, s.url+"/v1/tables/events/query?where=nosuch=1"); code != 400 || !strings.Contains(body, "nosuch") {
		t.Errorf("unknown where column: %d %s", code, body)
	}
	if code, _ := get(t, s.url+"/v1/tables/nope/query"); code != 404 {
		t.Errorf("unknown table query: %d", code)
	}
	if code, body := get(t, s.url+"/v1/tables/events/query?from=yesterday"); code != 400 {
		t.Errorf("bad time: %d %s", code, body)
	}
	// Nothing acknowledged was lost and nothing of a rejected batch is
	// visible: exactly the two good single-row batches... the first one
	// and the one inside no rejected batch.
	code, body := get(t, s.url+"/v1/tables/events/query")
	if got := lines(body); code != 200 || len(got) != 1 {
		t.Fatalf("after bad input: %d rows (%d bytes), want the 1 acknowledged row", len(got), len(body))
	}
}

// TestSlowClient: a client that sends headers and then stalls is cut off by
// the read timeout, and the server keeps serving others meanwhile.
func TestSlowClient(t *testing.T) {
	s := startServer(t, strings.Replace(testConfig, "read_timeout: 2s", "read_timeout: 300ms", 1), "")
	c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/tables/events/rows HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: 1000\r\n\r\n{\"user\":")
	if code, _ := get(t, s.url+"/healthz"); code != 200 {
		t.Fatalf("healthz while a client stalls: %d", code)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(c)
	if got := firstLine(b); got != "HTTP/1.1 408 Request Timeout\r" {
		t.Fatalf("stalled client got %q, want 408", got)
	}
	if code, _ := get(t, s.url+"/healthz"); code != 200 {
		t.Fatalf("healthz after: %d", code)
	}
}

// TestQueueFull: with one ingest slot held by a client still sending its
// body, the next batch gets 429 with Retry-After; the held one then
// completes and is stored.
func TestQueueFull(t *testing.T) {
	s := startServer(t, strings.Replace(testConfig, "limits: {", "limits: {max_inflight: 1, ", 1), "")
	// Hold the only slot as a batch being decoded, computed or stored does.
	if !s.queue.TryEnter() {
		t.Fatal("the slot is taken")
	}
	row := `{"user":"ann","ts":"2024-05-01T10:00:00Z","n":1}` + "\n"
	code, res, hdr := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(row))
	if code != 429 || hdr.Get("Retry-After") == "" {
		t.Fatalf("full queue: %d %v Retry-After %q", code, res, hdr.Get("Retry-After"))
	}
	if _, body := get(t, s.url+"/metrics"); !strings.Contains(body, "sluice_ingest_throttled_total 1") {
		t.Error("throttled not counted")
	}
	s.queue.Leave()
	if code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(row)); code != 200 {
		t.Fatalf("after the slot freed: %d %v", code, res)
	}
}

// TestSlowBodiesHoldNoSlot: clients trickling partial bodies do not hold
// ingest slots (six of them used to take every slot for the whole
// read_timeout): with one slot, a whole batch is stored while they wait,
// a held body completed later is stored, and a body that does not arrive
// within read_timeout gets 408 (not 400 "bad input: ... i/o timeout").
func TestSlowBodiesHoldNoSlot(t *testing.T) {
	s := startServer(t, strings.Replace(testConfig, "limits: {", "limits: {max_inflight: 1, ", 1), "")
	row := `{"user":"ann","ts":"2024-05-01T10:00:00Z","n":1}` + "\n"
	var slow []net.Conn
	for range 6 {
		c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/tables/events/rows HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: %d\r\n\r\n%s", 2*len(row), row)
		slow = append(slow, c)
	}
	time.Sleep(100 * time.Millisecond) // let the server start reading them
	for i := range 3 {
		if code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(row)); code != 200 {
			t.Fatalf("batch %d while six bodies trickle: %d %v, want 200", i, code, res)
		}
	}
	// The first slow body completes: stored.
	io.WriteString(slow[0], row)
	slow[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(slow[0]), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"accepted":2`) {
		t.Fatalf("completed slow body: %d %s", resp.StatusCode, b)
	}
	// The others never complete: 408 once read_timeout (2s) passes.
	for i, c := range slow[1:] {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("slow body %d: %v", i+1, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "read_timeout") {
			t.Errorf("slow body %d: %d %s, want 408 naming read_timeout", i+1, resp.StatusCode, b)
		}
	}
	if s.bodyBytes.Load() != 0 {
		t.Errorf("%d body bytes still reserved after every request ended", s.bodyBytes.Load())
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestCheckReportsEveryTable(t *testing.T) {
	bad := `
tables:
  - name: a
    computed: [{name: x, type: int64, func: "function main(row) return ( end"}]
  - name: b
    filters: [{name: f, func: "function main(row) return row.y == end"}]
  - name: c
`
	cfg, err := config.Parse([]byte(bad), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	err = Check(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), `table "a"`) || !strings.Contains(err.Error(), `table "b"`) {
		t.Fatalf("Check = %v, want errors of tables a and b", err)
	}
	good, _ := config.Parse([]byte("tables: [{name: a, computed: [{name: x, type: int64, func: \"function main(row) return 1 end\"}]}]"), func(string) (string, bool) { return "", false })
	if err := Check(context.Background(), good); err != nil {
		t.Fatalf("good config: %v", err)
	}
}

func TestPprofFlag(t *testing.T) {
	s := startServer(t, testConfig, "")
	if code, _ := get(t, s.url+"/debug/pprof/cmdline"); code != 404 {
		t.Errorf("pprof off: %d", code)
	}
	s2 := startServer(t, strings.Replace(testConfig, `listen: {http: "127.0.0.1:0"}`, `listen: {http: "127.0.0.1:0", pprof: true}`, 1), "")
	if code, _ := get(t, s2.url+"/debug/pprof/cmdline"); code != 200 {
		t.Errorf("pprof on: %d", code)
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

// TestBodyBudget: bodies being read share a budget of max_inflight ×
// (max_body_bytes + 64 KiB); past it a request gets 429 at once, and the
// budget comes back when the bodies end.
func TestBodyBudget(t *testing.T) {
	s := startServer(t, strings.Replace(testConfig, "limits: {", "limits: {max_inflight: 1, ", 1), "")
	row := `{"user":"ann","ts":"2024-05-01T10:00:00Z","n":1}` + "\n"
	part := strings.Repeat(row, 3000/len(row))
	var slow []net.Conn
	for s.bodyBytes.Load()+int64(len(part))+1 <= s.bodyBudget { // until the POST below cannot fit
		c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		before := s.bodyBytes.Load()
		fmt.Fprintf(c, "POST /v1/tables/events/rows HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: 4000\r\n\r\n%s", part)
		slow = append(slow, c)
		waitFor(t, func() bool { return s.bodyBytes.Load() > before })
		if len(slow) > 100 {
			t.Fatal("the budget never fills")
		}
	}
	code, res, hdr := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(part))
	if code != 429 || hdr.Get("Retry-After") == "" {
		t.Fatalf("with the body budget taken: %d %v, want 429 with Retry-After", code, res)
	}
	for _, c := range slow {
		c.Close()
	}
	waitFor(t, func() bool { return s.bodyBytes.Load() == 0 })
	if code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(part)); code != 200 {
		t.Fatalf("after the bodies ended: %d %v", code, res)
	}
}

// A body cut short (the client closes before Content-Length bytes) stores
// nothing: the complete lines it did send are not a smaller batch.
func TestBodyCutShortStoresNothing(t *testing.T) {
	s := startServer(t, testConfig, "")
	c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	row := `{"user":"cut","ts":"2024-05-01T10:00:00Z","n":1}` + "\n"
	fmt.Fprintf(c, "POST /v1/tables/events/rows HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: %d\r\n\r\n%s", 2*len(row), row)
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("cut body: %d %s, want 400", resp.StatusCode, b)
	}
	if _, body := get(t, s.url+"/v1/tables/events/query?hash=cut"); body != "" {
		t.Fatalf("a cut body stored rows: %q", body)
	}
}

// waitFor polls cond for up to 30 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > 3000 {
			t.Fatal("condition not reached in 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
