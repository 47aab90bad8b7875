package rdbtool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopLiveServer()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// fixtureDir holds RDB files written by real servers with the server's own
// account of their contents (rdb/testdata/redis/README.md).
var fixtureDir = filepath.Join("..", "rdb", "testdata", "redis")

// fixtures returns every fixture RDB file.
func fixtures(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(fixtureDir, "*.rdb"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures in %s (%v)", fixtureDir, err)
	}
	return paths
}

type fixtureDoc struct {
	Keys []map[string]any `json:"keys"`
}

func loadFixture(t *testing.T, rdbPath string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(strings.TrimSuffix(rdbPath, ".rdb") + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var doc fixtureDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Keys
}

// decodeBytes turns the BYTES form (string or {"base64": ...}) into bytes.
func decodeBytes(t *testing.T, v any) string {
	t.Helper()
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		b, err := base64.StdEncoding.DecodeString(v["base64"].(string))
		if err != nil {
			t.Fatalf("bad base64 %v: %v", v, err)
		}
		return string(b)
	}
	t.Fatalf("not a BYTES value: %#v", v)
	return ""
}

func scoreOf(t *testing.T, v any) float64 {
	t.Helper()
	switch v := v.(type) {
	case float64:
		return v
	case string:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("bad score %q", v)
		}
		return f
	}
	t.Fatalf("bad score %#v", v)
	return 0
}

// canonical puts a key record (ours or the fixture's) in a comparable form:
// bytes decoded, sets and hash fields sorted, zsets by score then member,
// scores as float64, module values reduced to the module name, and the
// fixture's informative fields removed.
func canonical(t *testing.T, rec map[string]any) map[string]any {
	t.Helper()
	out := map[string]any{
		"db":           rec["db"],
		"key":          decodeBytes(t, rec["key"]),
		"type":         rec["type"],
		"expire_at_ms": rec["expire_at_ms"],
	}
	v := rec["value"]
	switch rec["type"] {
	case "string":
		out["value"] = decodeBytes(t, v)
	case "list", "set":
		var items []string
		for _, x := range v.([]any) {
			items = append(items, decodeBytes(t, x))
		}
		if rec["type"] == "set" {
			sort.Strings(items)
		}
		out["value"] = items
	case "zset":
		type zm struct {
			Member string
			Score  float64
		}
		var ms []zm
		for _, x := range v.([]any) {
			m := x.(map[string]any)
			ms = append(ms, zm{decodeBytes(t, m["member"]), scoreOf(t, m["score"])})
		}
		sort.Slice(ms, func(i, j int) bool {
			if ms[i].Score != ms[j].Score {
				return ms[i].Score < ms[j].Score
			}
			return ms[i].Member < ms[j].Member
		})
		out["value"] = fmt.Sprint(ms)
	case "hash":
		var fs []string
		for _, x := range v.([]any) {
			m := x.(map[string]any)
			fs = append(fs, fmt.Sprintf("%q=%q exp=%v", decodeBytes(t, m["field"]), decodeBytes(t, m["value"]), m["expire_at_ms"]))
		}
		sort.Strings(fs)
		out["value"] = fs
	case "stream":
		out["value"] = canonicalStream(t, v.(map[string]any))
	case "module":
		out["value"] = v.(map[string]any)["module"]
	default:
		t.Fatalf("unknown type in %v", rec)
	}
	return out
}

func canonicalStream(t *testing.T, s map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range s {
		out[k] = v
	}
	var entries []string
	for _, e := range s["entries"].([]any) {
		e := e.(map[string]any)
		var fs []string
		for _, p := range e["fields"].([]any) {
			p := p.([]any)
			fs = append(fs, decodeBytes(t, p[0])+"="+decodeBytes(t, p[1]))
		}
		entries = append(entries, fmt.Sprint(e["id"], fs))
	}
	out["entries"] = entries
	var groups []string
	for _, g := range s["groups"].([]any) {
		g := g.(map[string]any)
		var pend []string
		for _, p := range g["pending"].([]any) {
			p := p.(map[string]any)
			pend = append(pend, fmt.Sprint(p["id"], decodeBytes(t, p["consumer"]), p["delivery_time_ms"], p["delivery_count"]))
		}
		var cons []string
		for _, c := range g["consumers"].([]any) {
			c := c.(map[string]any)
			cons = append(cons, fmt.Sprint(decodeBytes(t, c["name"]), c["seen_time_ms"], c["active_time_ms"], c["pending"]))
		}
		sort.Strings(cons)
		groups = append(groups, fmt.Sprint(decodeBytes(t, g["name"]), g["last_delivered_id"], g["entries_read"], pend, cons))
	}
	out["groups"] = groups
	return out
}

// exportRecords runs Export and decodes its output with encoding/json.
func exportRecords(t *testing.T, path string, format Format, opts Options) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	st, err := Export(context.Background(), path, &buf, format, opts)
	if err != nil {
		t.Fatalf("Export(%s): %v", path, err)
	}
	var recs []map[string]any
	if format == JSON {
		if err := json.Unmarshal(buf.Bytes(), &recs); err != nil {
			t.Fatalf("JSON export of %s is not a JSON array: %v", path, err)
		}
	} else {
		sc := bufio.NewScanner(&buf)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var r map[string]any
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("JSONL line of %s is not JSON: %v: %.200s", path, err, sc.Bytes())
			}
			recs = append(recs, r)
		}
	}
	if int64(len(recs)) != st.Keys {
		t.Errorf("Export reported %d keys, wrote %d", st.Keys, len(recs))
	}
	return recs
}

func recordID(t *testing.T, r map[string]any) string {
	return fmt.Sprintf("db %v key %q", r["db"], decodeBytes(t, r["key"]))
}

// compareRecords checks got (our export) against want (the server's
// account), key by key.
func compareRecords(t *testing.T, name string, want, got []map[string]any) {
	t.Helper()
	gotBy := map[string]map[string]any{}
	for _, r := range got {
		gotBy[recordID(t, r)] = r
	}
	if len(got) != len(want) {
		t.Errorf("%s: exported %d keys, the server had %d", name, len(got), len(want))
	}
	for _, w := range want {
		id := recordID(t, w)
		g, ok := gotBy[id]
		if !ok {
			t.Errorf("%s: %s missing from the export", name, id)
			continue
		}
		cw, cg := canonical(t, w), canonical(t, g)
		if cw["type"] == "stream" {
			// Fields the server reports only in some versions: compare those it reports.
			sw, sg := cw["value"].(map[string]any), cg["value"].(map[string]any)
			for k := range sg {
				if _, ok := sw[k]; !ok {
					delete(sg, k)
				}
			}
		}
		if !reflect.DeepEqual(cw, cg) {
			t.Errorf("%s: %s differs:\n want %v\n  got %v", name, id, cw, cg)
		}
	}
}

func TestExportMatchesFixtures(t *testing.T) {
	for _, path := range fixtures(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".rdb")
		t.Run(name, func(t *testing.T) {
			want := loadFixture(t, path)
			for _, serial := range []bool{false, true} {
				o := Options{NoParallel: serial}
				compareRecords(t, fmt.Sprintf("%s (jsonl, serial %v)", name, serial), want, exportRecords(t, path, JSONLines, o))
				compareRecords(t, fmt.Sprintf("%s (json, serial %v)", name, serial), want, exportRecords(t, path, JSON, o))
			}
		})
	}
}

func TestExportEmptyResultIsValidJSON(t *testing.T) {
	path := filepath.Join(fixtureDir, "redis-7.0.15.rdb")
	recs := exportRecords(t, path, JSON, Options{Filter: Filter{Prefixes: []string{"no such prefix"}}})
	if len(recs) != 0 {
		t.Errorf("got %d records", len(recs))
	}
}

// failingWriter fails once more than limit bytes have been written.
type failingWriter struct{ n, limit int }

var errDiskFull = errors.New("disk full")

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n+len(p) > w.limit {
		return 0, errDiskFull
	}
	w.n += len(p)
	return len(p), nil
}

func TestExportWriteErrorStops(t *testing.T) {
	path, _ := withLiveServer(t)
	for _, serial := range []bool{false, true} {
		_, err := Export(context.Background(), path, &failingWriter{limit: 300 << 10}, JSONLines, Options{NoParallel: serial})
		if !errors.Is(err, errDiskFull) {
			t.Errorf("serial %v: want the writer's error, got %v", serial, err)
		}
	}
}

func TestExportParallelEqualsSerial(t *testing.T) {
	path, _ := withLiveServer(t)
	for _, format := range []Format{JSON, JSONLines} {
		var par, ser bytes.Buffer
		if _, err := Export(context.Background(), path, &par, format, Options{}); err != nil {
			t.Fatal(err)
		}
		if _, err := Export(context.Background(), path, &ser, format, Options{NoParallel: true}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(par.Bytes(), ser.Bytes()) {
			t.Errorf("format %d: parallel and serial exports differ (%d vs %d bytes)", format, par.Len(), ser.Len())
		}
		if par.Len() < tapeSize*4 {
			t.Errorf("export of %d bytes does not cross enough tapes to test the hand-over", par.Len())
		}
	}
}
