package rdb_test

// Fixtures from real servers: every testdata/redis/*.rdb was written by a real
// Redis or Valkey SAVE, and the .json beside it holds what that server said
// its keys contained (format: testdata/redis/README.md). The parser's view of
// each file is converted to the same JSON shape and compared key by key.
//
// TestFixturesRoundTrip also runs the generator (testdata/gen/gen.py) against
// the servers installed on this machine and checks the fresh files the same
// way; it needs redis-server and the generator's Python packages (scripts/test
// installs both), and is skipped without them except in CI, where it fails.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/rdb"
)

// fixtureDoc is one expected-contents file.
type fixtureDoc struct {
	Server  string            `json:"server"`
	Version string            `json:"version"`
	Variant string            `json:"variant"`
	Magic   string            `json:"magic"`
	Config  map[string]string `json:"config"`
	Keys    []map[string]any  `json:"keys"`
}

// skippedFixtures names fixtures the parser cannot read yet, with the missing
// format. Keep it empty when the parser covers everything.
var skippedFixtures = map[string]string{}

func TestFixtures(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "redis", "*.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no fixtures in testdata/redis")
	}
	for _, path := range paths {
		checkFixture(t, path)
	}
}

func TestFixturesRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not starting servers")
	}
	unavailable := func(why string) {
		testenv.Missing(t, "round trip cannot run: %s (scripts/test installs what it needs)", why)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		unavailable("no redis-server on PATH")
	}
	python := generatorPython()
	if python == "" {
		unavailable("no Python with the redis package: set SLUICE_RDBGEN_PYTHON or run scripts/test")
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", "gen", "gen.py"),
		"--out", out, "--require", "redis-debian")
	// On timeout, SIGTERM lets the generator shut its servers down; they also get
	// SIGKILL if it dies (PR_SET_PDEATHSIG), so none outlives the test.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		t.Fatalf("generator: %v\n%s", err, log.String())
	}
	t.Logf("generator:\n%s", log.String())
	paths, err := filepath.Glob(filepath.Join(out, "*.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("generator wrote no fixture:\n%s", log.String())
	}
	for _, path := range paths {
		checkFixture(t, path)
		checkCommittedCurrent(t, path)
	}
}

// checkCommittedCurrent compares a freshly generated fixture's keys and types
// with the committed fixture of the same name, if there is one: a data set
// changed in gen.py without regenerating testdata/redis shows up here. Values
// are not compared, as relative expiries and stream times differ per run.
func checkCommittedCurrent(t *testing.T, fresh string) {
	t.Helper()
	name := strings.TrimSuffix(filepath.Base(fresh), ".rdb")
	committed := filepath.Join("testdata", "redis", name+".json")
	if _, err := os.Stat(committed); err != nil {
		t.Logf("%s: no committed fixture of that name (another server version?)", name)
		return
	}
	summary := func(doc *fixtureDoc) []string {
		var out []string
		for _, k := range doc.Keys {
			out = append(out, fmt.Sprintf("db %v key %s type %v", k["db"], jsonText(k["key"]), k["type"]))
		}
		sort.Strings(out)
		return out
	}
	got := summary(loadDoc(t, strings.TrimSuffix(fresh, ".rdb")+".json"))
	want := summary(loadDoc(t, committed))
	if d := diff("keys", any(toAny(want)), any(toAny(got))); d != "" {
		t.Errorf("%s: committed fixture is stale, regenerate testdata/redis (see its README): %s", name, d)
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// generatorPython returns a Python interpreter that can import redis, or "".
func generatorPython() string {
	var cands []string
	if p := os.Getenv("SLUICE_RDBGEN_PYTHON"); p != "" {
		cands = append(cands, p)
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, ".cache")
		}
	}
	if dir := os.Getenv("SLUICE_CACHE_DIR"); dir != "" {
		cands = append(cands, filepath.Join(dir, "rdbgen-venv", "bin", "python"))
	}
	if cache != "" {
		cands = append(cands, filepath.Join(cache, "sluice", "rdbgen-venv", "bin", "python"))
	}
	cands = append(cands, "python3")
	for _, c := range cands {
		if exec.Command(c, "-c", "import redis").Run() == nil {
			return c
		}
	}
	return ""
}

// checkFixture parses one .rdb three ways (in memory, streamed through a tiny
// window, and by path) and compares each with the .json beside it.
func checkFixture(t *testing.T, path string) {
	name := strings.TrimSuffix(filepath.Base(path), ".rdb")
	t.Run(name, func(t *testing.T) {
		if why, ok := skippedFixtures[name]; ok {
			t.Skipf("parser lacks %s", why)
		}
		doc := loadDoc(t, strings.TrimSuffix(path, ".rdb")+".json")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		modes := []struct {
			name string
			open func() (*rdb.Parser, error)
		}{
			{"bytes", func() (*rdb.Parser, error) { return rdb.NewBytesParser(data, nil), nil }},
			// A 64-byte window forces refills in the middle of every structure.
			{"stream", func() (*rdb.Parser, error) {
				return rdb.NewParser(bytes.NewReader(data), &rdb.Options{BufferSize: 64}), nil
			}},
			{"open", func() (*rdb.Parser, error) { return rdb.Open(path, nil) }},
		}
		for _, m := range modes {
			t.Run(m.name, func(t *testing.T) {
				p, err := m.open()
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				got, info := parseAll(t, name, p)
				compareKeys(t, name, doc, got)
				checkHeader(t, name, doc, p.Header(), info)
			})
		}
	})
}

func loadDoc(t *testing.T, path string) *fixtureDoc {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc fixtureDoc
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &doc
}

// fileInfo is what the parse saw besides the keys.
type fileInfo struct {
	encodings map[string]int
	keys      int
	slots     int // keys that came with a SLOT_INFO slot
	idles     int // keys with an LRU idle time
	freqs     int // keys with an LFU frequency
}

// requiredEncodings lists, per file magic, the on-disk encodings the full data
// set (variant "default") must produce: the generator's claim, checked.
var requiredEncodings = map[string][]string{
	"REDIS0009": {"string", "quicklist", "set", "intset", "zset2", "zset-ziplist", "hash",
		"hash-ziplist", "stream-listpacks"},
	"REDIS0010": {"string", "quicklist2", "set", "intset", "zset2", "zset-listpack", "hash",
		"hash-listpack", "stream-listpacks2"},
	"REDIS0012": {"string", "quicklist2", "set", "intset", "set-listpack", "zset2",
		"zset-listpack", "hash", "hash-listpack", "hash-listpack-ex", "hash-metadata",
		"stream-listpacks3", "module"},
	"VALKEY080": {"string", "quicklist2", "set", "intset", "set-listpack", "zset2",
		"zset-listpack", "hash", "hash-listpack", "hash2", "stream-listpacks3"},
}

// parseAll reads every key and converts it to the expected-JSON shape.
func parseAll(t *testing.T, name string, p *rdb.Parser) (map[string]map[string]any, fileInfo) {
	t.Helper()
	got := map[string]map[string]any{}
	info := fileInfo{encodings: map[string]int{}}
	for p.Next() {
		e := p.Entry()
		rec := map[string]any{
			"db":   e.DB,
			"key":  jsonBytes(e.Key),
			"type": e.Type.String(),
		}
		if e.ExpireAt != 0 {
			rec["expire_at_ms"] = e.ExpireAt
		} else {
			rec["expire_at_ms"] = nil
		}
		if e.Freq >= 0 {
			rec["lfu_freq"] = e.Freq
			info.freqs++
		}
		if e.Idle >= 0 {
			info.idles++
		}
		info.keys++
		info.encodings[e.Encoding.String()]++
		if e.Slot >= 0 {
			info.slots++
		}
		id := keyID(e.DB, e.Key)
		enc := e.Encoding
		var (
			value any
			err   error
		)
		switch e.Type {
		case rdb.String:
			var v []byte
			v, err = p.Value()
			value = jsonBytes(v)
		case rdb.List:
			value, err = visitList(p)
		case rdb.Set:
			value, err = visitSet(p)
		case rdb.ZSet:
			value, err = visitZSet(p)
		case rdb.Hash:
			value, err = visitHash(p)
		case rdb.Stream:
			value, err = visitStream(p, enc)
		case rdb.Module:
			value = map[string]any{"module": e.Module}
			// Walk the module's opcodes: the value must parse even if we
			// cannot check what it means.
			err = p.Visit(func(*rdb.Element) error { return nil })
		default:
			t.Fatalf("%s: %s: unexpected type %v", name, id, e.Type)
		}
		if err != nil {
			t.Fatalf("%s: %s: reading value: %v", name, id, err)
		}
		rec["value"] = value
		if _, dup := got[id]; dup {
			t.Errorf("%s: %s: key appears twice", name, id)
		}
		got[id] = rec
	}
	if err := p.Err(); err != nil {
		t.Fatalf("%s: parse: %v", name, err)
	}
	return got, info
}

func visitList(p *rdb.Parser) (any, error) {
	items := []any{}
	err := p.Visit(func(el *rdb.Element) error {
		if el.Kind != rdb.ListItem {
			return fmt.Errorf("list: unexpected element kind %v", el.Kind)
		}
		items = append(items, jsonBytes(el.Member))
		return nil
	})
	return items, err
}

func visitSet(p *rdb.Parser) (any, error) {
	var members [][]byte
	err := p.Visit(func(el *rdb.Element) error {
		if el.Kind != rdb.SetMember {
			return fmt.Errorf("set: unexpected element kind %v", el.Kind)
		}
		members = append(members, bytes.Clone(el.Member))
		return nil
	})
	sort.Slice(members, func(i, j int) bool { return bytes.Compare(members[i], members[j]) < 0 })
	out := []any{}
	for _, m := range members {
		out = append(out, jsonBytes(m))
	}
	return out, err
}

func visitZSet(p *rdb.Parser) (any, error) {
	type scored struct {
		member []byte
		score  float64
	}
	var ms []scored
	err := p.Visit(func(el *rdb.Element) error {
		if el.Kind != rdb.ZSetMember {
			return fmt.Errorf("zset: unexpected element kind %v", el.Kind)
		}
		ms = append(ms, scored{bytes.Clone(el.Member), el.Score})
		return nil
	})
	// ZRANGE order: by score, then by member bytes.
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].score != ms[j].score {
			return ms[i].score < ms[j].score
		}
		return bytes.Compare(ms[i].member, ms[j].member) < 0
	})
	out := []any{}
	for _, m := range ms {
		out = append(out, map[string]any{"member": jsonBytes(m.member), "score": formatScore(m.score)})
	}
	return out, err
}

func visitHash(p *rdb.Parser) (any, error) {
	type field struct {
		field, value []byte
		expireAt     int64
	}
	var fs []field
	err := p.Visit(func(el *rdb.Element) error {
		if el.Kind != rdb.HashField {
			return fmt.Errorf("hash: unexpected element kind %v", el.Kind)
		}
		fs = append(fs, field{bytes.Clone(el.Member), bytes.Clone(el.Value), el.ExpireAt})
		return nil
	})
	sort.Slice(fs, func(i, j int) bool { return bytes.Compare(fs[i].field, fs[j].field) < 0 })
	out := []any{}
	for _, f := range fs {
		m := map[string]any{"field": jsonBytes(f.field), "value": jsonBytes(f.value)}
		if f.expireAt != 0 {
			m["expire_at_ms"] = f.expireAt
		}
		out = append(out, m)
	}
	return out, err
}

// visitStream collects a stream's elements into the expected shape. Fields
// the encoding does not store (stream-listpacks v1 has no entries_added,
// first ID, max deleted ID or entries_read; v3 adds consumer active time) are
// left out, as the server leaves them out of XINFO.
func visitStream(p *rdb.Parser, enc rdb.Encoding) (any, error) {
	type group struct {
		name     []byte
		obj      map[string]any
		pending  []rdb.Element // StreamPending elements (ID, DeliveryTime, DeliveryCount)
		owner    map[rdb.StreamID][]byte
		consumer map[string]map[string]any
		cpending map[string][]rdb.StreamID
	}
	v1 := enc == rdb.EncStreamListpacks
	v2 := enc == rdb.EncStreamListpacks2
	out := map[string]any{}
	entries := []any{}
	var groups []*group
	byName := map[string]*group{}
	find := func(name []byte) (*group, error) {
		g := byName[string(name)]
		if g == nil {
			return nil, fmt.Errorf("stream: element for unknown group %q", name)
		}
		return g, nil
	}
	err := p.Visit(func(el *rdb.Element) error {
		switch el.Kind {
		case rdb.StreamEntry:
			fields := []any{}
			for i := 0; i+1 < len(el.Fields); i += 2 {
				fields = append(fields, []any{jsonBytes(el.Fields[i]), jsonBytes(el.Fields[i+1])})
			}
			if len(el.Fields)%2 != 0 {
				return fmt.Errorf("stream entry %v: odd field count %d", el.ID, len(el.Fields))
			}
			entries = append(entries, map[string]any{"id": el.ID.String(), "fields": fields})
		case rdb.StreamInfo:
			out["length"] = el.Stream.Length
			out["last_id"] = el.Stream.LastID.String()
			if !v1 {
				out["entries_added"] = el.Stream.EntriesAdded
				out["max_deleted_entry_id"] = el.Stream.MaxDeletedID.String()
				out["first_id"] = el.Stream.FirstID.String()
			}
		case rdb.StreamGroup:
			g := &group{
				name:     bytes.Clone(el.Member),
				obj:      map[string]any{"name": jsonBytes(el.Member), "last_delivered_id": el.ID.String()},
				owner:    map[rdb.StreamID][]byte{},
				consumer: map[string]map[string]any{},
				cpending: map[string][]rdb.StreamID{},
			}
			if !v1 {
				if el.Stream.EntriesRead < 0 {
					g.obj["entries_read"] = nil
				} else {
					g.obj["entries_read"] = el.Stream.EntriesRead
				}
			}
			if byName[string(g.name)] != nil {
				return fmt.Errorf("stream: group %q twice", g.name)
			}
			groups = append(groups, g)
			byName[string(g.name)] = g
		case rdb.StreamPending:
			g, err := find(el.Group)
			if err != nil {
				return err
			}
			g.pending = append(g.pending, rdb.Element{
				ID: el.ID, DeliveryTime: el.DeliveryTime, DeliveryCount: el.DeliveryCount,
			})
		case rdb.StreamConsumer:
			g, err := find(el.Group)
			if err != nil {
				return err
			}
			c := map[string]any{"name": jsonBytes(el.Member), "seen_time_ms": el.SeenTime}
			// Active time is stored from stream-listpacks v3 on, where -1
			// is a real value (never active), as XINFO shows it.
			if !v1 && !v2 {
				c["active_time_ms"] = el.ActiveTime
			}
			g.consumer[string(el.Member)] = c
		case rdb.StreamConsumerPending:
			g, err := find(el.Group)
			if err != nil {
				return err
			}
			g.owner[el.ID] = bytes.Clone(el.Member)
			g.cpending[string(el.Member)] = append(g.cpending[string(el.Member)], el.ID)
		default:
			return fmt.Errorf("stream: unexpected element kind %v", el.Kind)
		}
		return nil
	})
	out["entries"] = entries
	gs := []any{}
	for _, g := range groups {
		pending := []any{}
		for _, el := range g.pending {
			pe := map[string]any{
				"id": el.ID.String(), "delivery_time_ms": el.DeliveryTime, "delivery_count": el.DeliveryCount,
			}
			if owner, ok := g.owner[el.ID]; ok {
				pe["consumer"] = jsonBytes(owner)
			} else {
				pe["consumer"] = nil // a PEL entry no consumer owns: shows up as a diff
			}
			pending = append(pending, pe)
		}
		g.obj["pending"] = pending
		names := make([]string, 0, len(g.consumer))
		for n := range g.consumer {
			names = append(names, n)
		}
		// Sorted as the generator sorts them: by the JSON text of the name.
		sort.Slice(names, func(i, j int) bool {
			return jsonText(jsonBytes([]byte(names[i]))) < jsonText(jsonBytes([]byte(names[j])))
		})
		consumers := []any{}
		for _, n := range names {
			c := g.consumer[n]
			ids := g.cpending[n]
			sort.Slice(ids, func(i, j int) bool {
				if ids[i].Ms != ids[j].Ms {
					return ids[i].Ms < ids[j].Ms
				}
				return ids[i].Seq < ids[j].Seq
			})
			pl := []any{}
			for _, id := range ids {
				pl = append(pl, id.String())
			}
			c["pending"] = pl
			consumers = append(consumers, c)
		}
		g.obj["consumers"] = consumers
		gs = append(gs, g.obj)
	}
	out["groups"] = gs
	return out, err
}

// formatScore gives a score one canonical text, so that "0.1" and
// "0.10000000000000001" (the same float64, as different servers print it)
// compare equal.
func formatScore(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// jsonBytes is the README's BYTES: a string when valid UTF-8, else base64.
func jsonBytes(b []byte) any {
	if utf8.Valid(b) {
		return string(b)
	}
	return map[string]any{"base64": base64.StdEncoding.EncodeToString(b)}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func keyID(db int, key []byte) string {
	return fmt.Sprintf("db %d key %s", db, jsonText(jsonBytes(key)))
}

// normalize turns a value into the generic tree encoding/json would decode
// it to (numbers as json.Number), and gives zset scores canonical text.
func normalize(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		panic(err)
	}
	return out
}

func canonicalScores(typ string, value any) any {
	if typ != "zset" {
		return value
	}
	list, ok := value.([]any)
	if !ok {
		return value
	}
	for _, m := range list {
		if obj, ok := m.(map[string]any); ok {
			if s, ok := obj["score"].(string); ok {
				if f, err := strconv.ParseFloat(s, 64); err == nil {
					obj["score"] = formatScore(f)
				}
			}
		}
	}
	return value
}

func compareKeys(t *testing.T, name string, doc *fixtureDoc, got map[string]map[string]any) {
	t.Helper()
	for _, problem := range keyDiffs(name, doc, got) {
		t.Error(problem)
	}
}

// keyDiffs lists every key whose parsed record differs from the expected one,
// naming the fixture, db, key and the first differing path.
func keyDiffs(name string, doc *fixtureDoc, got map[string]map[string]any) []string {
	var problems []string
	want := map[string]bool{}
	for _, k := range doc.Keys {
		db, _ := k["db"].(json.Number).Int64()
		keyBytes, err := fromJSONBytes(k["key"])
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: bad key in expected JSON: %v", name, err))
			continue
		}
		id := keyID(int(db), keyBytes)
		want[id] = true
		g, ok := got[id]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: %s: missing from the parser's output", name, id))
			continue
		}
		typ, _ := k["type"].(string)
		w := normalize(k).(map[string]any)
		delete(w, "object_encoding") // the server's in-memory encoding: informative only
		w["value"] = canonicalScores(typ, w["value"])
		if d := diff("", w, normalize(g)); d != "" {
			problems = append(problems, fmt.Sprintf("%s: %s (%s): %s", name, id, typ, d))
		}
	}
	var extra []string
	for id := range got {
		if !want[id] {
			extra = append(extra, fmt.Sprintf("%s: %s: parser found a key the server did not have", name, id))
		}
	}
	sort.Strings(extra)
	return append(problems, extra...)
}

func fromJSONBytes(v any) ([]byte, error) {
	switch x := v.(type) {
	case string:
		return []byte(x), nil
	case map[string]any:
		s, _ := x["base64"].(string)
		return base64.StdEncoding.DecodeString(s)
	}
	return nil, fmt.Errorf("not BYTES: %v", v)
}

// diff returns "" when want and got are equal, else the first difference
// with its path ("value[3].score: want \"1.5\", got \"2\"").
func diff(path string, want, got any) string {
	show := func(v any) string {
		s := jsonText(v)
		if len(s) > 120 {
			s = s[:120] + "..."
		}
		return s
	}
	at := path
	if at == "" {
		at = "(record)"
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: want %s, got %s", at, show(want), show(got))
		}
		keys := make([]string, 0, len(w)+len(g))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			wv, wok := w[k]
			gv, gok := g[k]
			switch {
			case !gok:
				return fmt.Sprintf("%s: missing (want %s)", p, show(wv))
			case !wok:
				return fmt.Sprintf("%s: unexpected (got %s)", p, show(gv))
			}
			if d := diff(p, wv, gv); d != "" {
				return d
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Sprintf("%s: want %s, got %s", at, show(want), show(got))
		}
		for i := 0; i < len(w) && i < len(g); i++ {
			if d := diff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); d != "" {
				return d
			}
		}
		if len(w) != len(g) {
			return fmt.Sprintf("%s: want %d elements, got %d", at, len(w), len(g))
		}
		return ""
	}
	if !reflect.DeepEqual(want, got) {
		return fmt.Sprintf("%s: want %s, got %s", at, show(want), show(got))
	}
	return ""
}

// checkHeader compares what the file header and AUX fields say with what the
// server said about itself, and the checksum with the variant.
func checkHeader(t *testing.T, name string, doc *fixtureDoc, h *rdb.Header, info fileInfo) {
	t.Helper()
	magic := fmt.Sprintf("%s%04d", h.Magic, h.Version)
	if h.Magic == "VALKEY" {
		magic = fmt.Sprintf("%s%03d", h.Magic, h.Version)
	}
	if magic != doc.Magic {
		t.Errorf("%s: header says %s, file starts with %s", name, magic, doc.Magic)
	}
	var vers []string
	for _, a := range h.Aux {
		if strings.HasSuffix(a.Key, "-ver") {
			vers = append(vers, a.Key+"="+a.Value)
			if a.Value == doc.Version {
				vers = nil
				break
			}
		}
	}
	if vers != nil || len(h.Aux) == 0 {
		t.Errorf("%s: no *-ver AUX field says %s (found %v)", name, doc.Version, vers)
	}
	noChecksum := doc.Config["rdbchecksum"] == "no"
	if noChecksum != (h.Checksum == 0) {
		t.Errorf("%s: rdbchecksum %q but stored checksum is %#x", name, doc.Config["rdbchecksum"], h.Checksum)
	}
	// Redis writes SLOT_INFO from RDB 12 on; Valkey 9 writes none.
	if doc.Config["cluster-enabled"] == "yes" && h.Magic == "REDIS" && h.Version >= 12 && info.slots == 0 {
		t.Errorf("%s: cluster-mode dump but no key came with a SLOT_INFO slot", name)
	}
	switch policy := doc.Config["maxmemory-policy"]; {
	case strings.Contains(policy, "lru") && info.idles != info.keys:
		t.Errorf("%s: policy %s but only %d of %d keys have an IDLE time", name, policy, info.idles, info.keys)
	case strings.Contains(policy, "lfu") && info.freqs != info.keys:
		t.Errorf("%s: policy %s but only %d of %d keys have a FREQ", name, policy, info.freqs, info.keys)
	case !strings.Contains(policy, "lru") && info.idles != 0, !strings.Contains(policy, "lfu") && info.freqs != 0:
		t.Errorf("%s: policy %q but %d IDLE and %d FREQ hints", name, policy, info.idles, info.freqs)
	}
	if doc.Variant == "default" {
		req, ok := requiredEncodings[doc.Magic]
		if !ok {
			t.Errorf("%s: no required encodings listed for %s", name, doc.Magic)
		}
		for _, enc := range req {
			if info.encodings[enc] == 0 {
				t.Errorf("%s: the data set should produce encoding %s; got %v", name, enc, info.encodings)
			}
		}
	}
	t.Logf("%s: encodings %v", name, info.encodings)
}

// TestFixtureComparisonCatchesDifferences makes sure the comparison above can
// fail: the parser's view of a real fixture, altered in ways a parser bug
// would alter it, must be reported, naming the key.
func TestFixtureComparisonCatchesDifferences(t *testing.T) {
	const name = "redis-7.0.15"
	path := filepath.Join("testdata", "redis", name+".rdb")
	doc := loadDoc(t, filepath.Join("testdata", "redis", name+".json"))
	p, err := rdb.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, _ := parseAll(t, name, p)
	if d := keyDiffs(name, doc, got); len(d) != 0 {
		t.Fatalf("fixture does not match before any change: %v", d)
	}
	mutations := []struct {
		key    string // the key named in the report
		mutate func(got map[string]map[string]any)
	}{
		{`"zset:small"`, func(got map[string]map[string]any) {
			ms := got[`db 0 key "zset:small"`]["value"].([]any)
			ms[2].(map[string]any)["score"] = "1.5000000000000002" // one ulp off
		}},
		{`"list:many-nodes"`, func(got map[string]map[string]any) {
			items := got[`db 0 key "list:many-nodes"`]["value"].([]any)
			items[10], items[11] = items[11], items[10]
		}},
		{`"str:expire-abs"`, func(got map[string]map[string]any) {
			got[`db 0 key "str:expire-abs"`]["expire_at_ms"] = int64(4102444800124)
		}},
		{`"str:ascii"`, func(got map[string]map[string]any) {
			got[`db 1 key "str:ascii"`]["db"] = 2
		}},
		{`"str:invalid-utf8"`, func(got map[string]map[string]any) {
			got[`db 0 key "str:invalid-utf8"`]["value"] = "\ufffd\ufffd( abc"
		}},
		{`"stream:events"`, func(got map[string]map[string]any) {
			g := got[`db 0 key "stream:events"`]["value"].(map[string]any)["groups"].([]any)
			for _, grp := range g {
				for _, pe := range grp.(map[string]any)["pending"].([]any) {
					pe.(map[string]any)["delivery_count"] = uint64(7)
				}
			}
		}},
		{`"db15:last"`, func(got map[string]map[string]any) {
			delete(got, `db 15 key "db15:last"`)
		}},
	}
	for _, m := range mutations {
		p, err := rdb.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := parseAll(t, name, p)
		p.Close()
		m.mutate(got)
		d := keyDiffs(name, doc, got)
		if len(d) == 0 {
			t.Errorf("change to %s went unnoticed", m.key)
			continue
		}
		if !strings.Contains(strings.Join(d, "\n"), m.key) {
			t.Errorf("change to %s reported without naming it: %v", m.key, d)
		}
	}
}
