package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/sluicedb/sluice/internal/rdbfixture"
	"github.com/sluicedb/sluice/rdb"
	"github.com/sluicedb/sluice/rdbtool"
)

// rdbFixtures are the real-server snapshots (rdb/testdata/redis) checked
// here: every server the repository has, each with its full data set.
var rdbFixtures = []string{"redis-6.2.14", "redis-7.0.15", "redis-stack-7.4.1", "valkey-9.1.2"}

// decodeRDBAll runs DecodeRDB over data and returns every row emitted and the
// batch sizes.
func decodeRDBAll(t *testing.T, r io.Reader, opts RDBOptions) ([]Row, []int, RDBDecoded, error) {
	t.Helper()
	var rows []Row
	var sizes []int
	d, err := DecodeRDB(context.Background(), r, opts, func(b []Row) error {
		rows = append(rows, b...)
		sizes = append(sizes, len(b))
		return nil
	})
	return rows, sizes, d, err
}

func rowID(db any, key any) string { return fmt.Sprintf("%v/%q", db, key) }

// TestDecodeRDBMatchesServer reads each real-server snapshot as rows and
// compares every row with what the server said the key held (db, key,
// type, expiry, value), and checks the row's columns and batches.
func TestDecodeRDBMatchesServer(t *testing.T) {
	for _, name := range rdbFixtures {
		t.Run(name, func(t *testing.T) {
			fx, err := rdbfixture.Load(name)
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(rdbfixture.Path(name))
			if err != nil {
				t.Fatal(err)
			}
			// One byte per Read: every structure straddles reads.
			overlap := strings.HasPrefix(name, "redis-stack") || strings.HasPrefix(name, "valkey")
			rows, sizes, d, err := decodeRDBAll(t, iotest.OneByteReader(bytes.NewReader(data)), RDBOptions{BatchRows: 7, Name: name, Overlap: overlap})
			if err != nil {
				t.Fatal(err)
			}
			if d.Rows != int64(len(fx.Keys)) || len(rows) != len(fx.Keys) || d.Bytes != int64(len(data)) {
				t.Fatalf("rows %d (decoded %d), bytes %d; the server had %d keys in %d bytes", len(rows), d.Rows, d.Bytes, len(fx.Keys), len(data))
			}
			for i, n := range sizes {
				if n > 7 || (n < 7 && i != len(sizes)-1) {
					t.Fatalf("batch sizes %v: want 7 each but the last", sizes)
				}
			}
			byID := map[string]Row{}
			for _, r := range rows {
				for _, col := range []string{"db", "key", "type", "encoding", "rdb_encoding", "memory_bytes", "elements", "len_largest", "value", "time"} {
					if _, ok := r[col]; !ok {
						t.Fatalf("row %v has no %s", r, col)
					}
				}
				if r["memory_bytes"].(int64) <= 0 {
					t.Errorf("key %q: memory_bytes %v", r["key"], r["memory_bytes"])
				}
				byID[rowID(r["db"], r["key"])] = r
			}
			for _, k := range fx.Keys {
				r, ok := byID[rowID(int64(k.DB), k.Key)]
				if !ok {
					t.Errorf("db %d key %q: no row", k.DB, k.Key)
					continue
				}
				if r["type"] != k.Type {
					t.Errorf("db %d key %q: type %v, server says %s", k.DB, k.Key, r["type"], k.Type)
					continue
				}
				exp, hasExp := r["expire_at"]
				switch {
				case k.ExpireAtMs == nil && hasExp:
					t.Errorf("db %d key %q: expire_at %v, server says none", k.DB, k.Key, exp)
				case k.ExpireAtMs != nil && (!hasExp || exp.(time.Time).UnixMilli() != *k.ExpireAtMs):
					t.Errorf("db %d key %q: expire_at %v, server says %d ms", k.DB, k.Key, exp, *k.ExpireAtMs)
				}
				got, err := canonValue(k.Type, r["value"].(json.RawMessage))
				if err != nil {
					t.Errorf("db %d key %q: row value: %v", k.DB, k.Key, err)
					continue
				}
				want, err := canonValue(k.Type, k.Value)
				if err != nil {
					t.Fatalf("fixture db %d key %q: %v", k.DB, k.Key, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("db %d key %q (%s): value\n got  %v\n want %v", k.DB, k.Key, k.Type, got, want)
				}
			}
		})
	}
}

// canonValue brings a value in the export form or the fixtures' form to
// one comparable shape: sets and hash fields sorted, zsets by score then
// member with scores as float64 (the fixtures keep the server's text),
// streams as their entries, length and last ID, modules as their type name.
func canonValue(typ string, v json.RawMessage) (any, error) {
	str := rdbfixture.Bytes
	strs := func(v json.RawMessage) ([]string, error) {
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			return nil, err
		}
		out := make([]string, len(items))
		for i, it := range items {
			s, err := str(it)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	}
	switch typ {
	case "string":
		return str(v)
	case "list":
		return strs(v)
	case "set":
		s, err := strs(v)
		sort.Strings(s)
		return s, err
	case "zset":
		var items []struct {
			Member json.RawMessage `json:"member"`
			Score  json.RawMessage `json:"score"`
		}
		if err := json.Unmarshal(v, &items); err != nil {
			return nil, err
		}
		type ms struct {
			M string
			S float64
		}
		out := make([]ms, len(items))
		for i, it := range items {
			m, err := str(it.Member)
			if err != nil {
				return nil, err
			}
			sc := strings.Trim(string(it.Score), `"`)
			f, err := strconv.ParseFloat(sc, 64)
			if err != nil {
				return nil, fmt.Errorf("score %s: %w", it.Score, err)
			}
			out[i] = ms{m, f}
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].S != out[j].S {
				return out[i].S < out[j].S
			}
			return out[i].M < out[j].M
		})
		for i := range out { // NaN never equals itself: compare its text
			if math.IsNaN(out[i].S) {
				out[i].S = -1e308
			}
		}
		return out, nil
	case "hash":
		var items []struct {
			Field    json.RawMessage `json:"field"`
			Value    json.RawMessage `json:"value"`
			ExpireAt *int64          `json:"expire_at_ms"`
		}
		if err := json.Unmarshal(v, &items); err != nil {
			return nil, err
		}
		out := make([]string, len(items))
		for i, it := range items {
			f, err := str(it.Field)
			if err != nil {
				return nil, err
			}
			val, err := str(it.Value)
			if err != nil {
				return nil, err
			}
			exp := "-"
			if it.ExpireAt != nil {
				exp = strconv.FormatInt(*it.ExpireAt, 10)
			}
			out[i] = strconv.Quote(f) + "=" + strconv.Quote(val) + "@" + exp
		}
		sort.Strings(out)
		return out, nil
	case "stream":
		var s struct {
			Entries []struct {
				ID     string              `json:"id"`
				Fields [][]json.RawMessage `json:"fields"`
			} `json:"entries"`
			Length int64  `json:"length"`
			LastID string `json:"last_id"`
		}
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, err
		}
		out := []string{fmt.Sprintf("length=%d last=%s", s.Length, s.LastID)}
		for _, e := range s.Entries {
			line := e.ID
			for _, fv := range e.Fields {
				for _, x := range fv {
					b, err := str(x)
					if err != nil {
						return nil, err
					}
					line += " " + strconv.Quote(b)
				}
			}
			out = append(out, line)
		}
		return out, nil
	case "module":
		var m struct {
			Module string `json:"module"`
		}
		err := json.Unmarshal(v, &m)
		return m.Module, err
	}
	return nil, fmt.Errorf("unknown type %q", typ)
}

// TestDecodeRDBFilters checks each filter against the server's own list of
// keys (db, type, prefix, glob, regex) and min-size against the estimates
// of an unfiltered read.
func TestDecodeRDBFilters(t *testing.T) {
	const name = "redis-7.0.15"
	fx, err := rdbfixture.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(rdbfixture.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	ids := func(rows []Row) []string {
		var out []string
		for _, r := range rows {
			out = append(out, rowID(r["db"], r["key"]))
		}
		sort.Strings(out)
		return out
	}
	want := func(keep func(k rdbfixture.Key) bool) []string {
		var out []string
		for _, k := range fx.Keys {
			if keep(k) {
				out = append(out, rowID(int64(k.DB), k.Key))
			}
		}
		sort.Strings(out)
		return out
	}
	re := regexp.MustCompile(`^str:int\d+$`)
	cases := []struct {
		name   string
		filter rdbtool.Filter
		keep   func(k rdbfixture.Key) bool
	}{
		{"db", rdbtool.Filter{DBs: []int{1, 15}}, func(k rdbfixture.Key) bool { return k.DB == 1 || k.DB == 15 }},
		{"type", rdbtool.Filter{Types: []rdb.Type{rdb.Hash, rdb.ZSet}}, func(k rdbfixture.Key) bool { return k.Type == "hash" || k.Type == "zset" }},
		{"prefix", rdbtool.Filter{Prefixes: []string{"list:", "set:"}}, func(k rdbfixture.Key) bool {
			return strings.HasPrefix(k.Key, "list:") || strings.HasPrefix(k.Key, "set:")
		}},
		{"pattern", rdbtool.Filter{Pattern: "*:small"}, func(k rdbfixture.Key) bool { return strings.HasSuffix(k.Key, ":small") }},
		{"regex", rdbtool.Filter{Regex: re.String()}, func(k rdbfixture.Key) bool { return re.MatchString(k.Key) }},
		{"db+type", rdbtool.Filter{DBs: []int{0}, Types: []rdb.Type{rdb.String}}, func(k rdbfixture.Key) bool { return k.DB == 0 && k.Type == "string" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rows, _, _, err := decodeRDBAll(t, bytes.NewReader(data), RDBOptions{Filter: c.filter, BatchRows: 4})
			if err != nil {
				t.Fatal(err)
			}
			got, exp := ids(rows), want(c.keep)
			if len(exp) == 0 || len(exp) == len(fx.Keys) {
				t.Fatalf("the case selects %d of %d keys: not a filter test", len(exp), len(fx.Keys))
			}
			if !reflect.DeepEqual(got, exp) {
				t.Errorf("rows\n got  %v\n want %v", got, exp)
			}
		})
	}
	t.Run("min-size", func(t *testing.T) {
		all, _, _, err := decodeRDBAll(t, bytes.NewReader(data), RDBOptions{})
		if err != nil {
			t.Fatal(err)
		}
		const minSize = 1000
		var exp []Row
		for _, r := range all {
			if r["memory_bytes"].(int64) >= minSize {
				exp = append(exp, r)
			}
		}
		if len(exp) == 0 || len(exp) == len(all) {
			t.Fatalf("%d of %d keys are >= %d bytes: not a filter test", len(exp), len(all), minSize)
		}
		rows, _, _, err := decodeRDBAll(t, bytes.NewReader(data), RDBOptions{Filter: rdbtool.Filter{MinSize: minSize}})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ids(rows), ids(exp)) {
			t.Errorf("rows\n got  %v\n want %v", ids(rows), ids(exp))
		}
	})
}

// TestDecodeRDBTruncated cuts a snapshot at several places: the complete
// batches before the cut are emitted, the unfinished one is not, and the
// error names the input, the offset and (inside a value) the key.
func TestDecodeRDBTruncated(t *testing.T) {
	data, err := os.ReadFile(rdbfixture.Path("redis-7.0.15"))
	if err != nil {
		t.Fatal(err)
	}
	full, _, _, err := decodeRDBAll(t, bytes.NewReader(data), RDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{30, len(data) / 3, len(data) / 2, len(data) * 2 / 3, len(data) - 4} {
		for _, overlap := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/overlap=%v", cut, overlap), func(t *testing.T) {
				truncatedCase(t, data[:cut], full, overlap)
			})
		}
	}
}

func truncatedCase(t *testing.T, data []byte, full []Row, overlap bool) {
	cut := len(data)
	rows, sizes, d, err := decodeRDBAll(t, bytes.NewReader(data), RDBOptions{BatchRows: 5, Name: "cut.rdb", Overlap: overlap})
	if err == nil {
		t.Fatal("no error")
	}
	if !errors.Is(err, ErrBadInput) || !errors.Is(err, rdb.ErrTruncated) {
		t.Errorf("error %v: want ErrBadInput and rdb.ErrTruncated", err)
	}
	var ce *rdb.CorruptionError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "cut.rdb") || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", ce.Offset)) {
		t.Fatalf("error %q does not name the input and the offset", err)
	}
	if ce.Offset > int64(cut) || ce.Offset < 0 {
		t.Errorf("offset %d outside the %d bytes given", ce.Offset, cut)
	}
	for _, n := range sizes {
		if n != 5 {
			t.Errorf("emitted batch sizes %v: only complete batches of 5", sizes)
		}
	}
	if int64(len(rows)+d.Pending) != d.Rows || d.Pending >= 5 {
		t.Errorf("emitted %d, pending %d, decoded %d", len(rows), d.Pending, d.Rows)
	}
	if len(rows) > 0 && !reflect.DeepEqual(rows, full[:len(rows)]) {
		t.Errorf("the rows emitted are not the snapshot's first %d", len(rows))
	}
	if cut > 100 && cut < 18000 {
		// Inside the keys (the fixture is 18,807 bytes, its last cut falls in
		// the checksum) the cut falls in a value: the key is named.
		if ce.Key == nil || !strings.Contains(err.Error(), strconv.Quote(string(ce.Key))) {
			t.Errorf("error %q does not name the key", err)
		}
	}
}

// TestDecodeRDBCorrupt flips a byte inside a value: the checksum fails at
// the end, after every batch was emitted (the rows read are whole, the
// file is not what was written), and the error says so with the offset.
func TestDecodeRDBCorrupt(t *testing.T) {
	data, err := os.ReadFile(rdbfixture.Path("redis-7.0.15"))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte("hello")) // inside a string value
	if i < 0 {
		i = len(data) / 2
	}
	bad := bytes.Clone(data)
	bad[i] ^= 0x20
	_, _, _, err = decodeRDBAll(t, bytes.NewReader(bad), RDBOptions{BatchRows: 1000, Name: "bad.rdb"})
	if !errors.Is(err, ErrBadInput) || !errors.Is(err, rdb.ErrChecksum) || !strings.Contains(err.Error(), "bad.rdb") {
		t.Fatalf("error %v: want a checksum error naming bad.rdb", err)
	}
	// Without the checksum the same bytes read through.
	if _, _, _, err := decodeRDBAll(t, bytes.NewReader(bad), RDBOptions{SkipChecksum: true}); err != nil {
		t.Fatalf("with SkipChecksum: %v", err)
	}
}

// TestDecodeRDBBatchBytes: a batch is cut early when its values reach
// BatchBytes.
func TestDecodeRDBBatchBytes(t *testing.T) {
	data, err := os.ReadFile(rdbfixture.Path("redis-7.0.15"))
	if err != nil {
		t.Fatal(err)
	}
	rows, sizes, _, err := decodeRDBAll(t, bytes.NewReader(data), RDBOptions{BatchRows: 1000, BatchBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if len(sizes) < 2 {
		t.Fatalf("one batch of %d rows: BatchBytes not applied", len(rows))
	}
	at := 0
	for _, n := range sizes {
		total := 0
		for _, r := range rows[at : at+n] {
			total += len(r["value"].(json.RawMessage))
		}
		last := len(r0(rows[at+n-1]))
		if total-last >= 4096 {
			t.Errorf("batch of %d rows holds %d value bytes before its last row", n, total-last)
		}
		at += n
	}
}

func r0(r Row) json.RawMessage { return r["value"].(json.RawMessage) }

// TestDecodeRDBEmitError: an error about a row names its key and offset.
func TestDecodeRDBEmitError(t *testing.T) {
	data, err := os.ReadFile(rdbfixture.Path("redis-7.0.15"))
	if err != nil {
		t.Fatal(err)
	}
	full, _, _, err := decodeRDBAll(t, bytes.NewReader(data), RDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, overlap := range []bool{false, true} {
		calls := 0
		d, err := DecodeRDB(context.Background(), bytes.NewReader(data), RDBOptions{BatchRows: 10, Name: "x.rdb", Overlap: overlap}, func(rows []Row) error {
			if calls++; calls == 2 {
				return &RowError{Row: 3, Line: -1, Err: errors.New("no thanks")}
			}
			return nil
		})
		// Row 3 of the second batch is the snapshot's 14th key.
		want := fmt.Sprintf("x.rdb: key %q (db %d) at offset ", full[13]["key"], full[13]["db"])
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), ": row 3: no thanks") {
			t.Errorf("overlap=%v: error %v, want it to start %q", overlap, err, want)
		}
		if calls != 2 {
			t.Errorf("overlap=%v: %d emit calls, want none after the failing second (%+v)", overlap, calls, d)
		}
	}
}

// TestDecodeRDBStreams: rows are emitted while the snapshot is still
// arriving (nothing waits for the end of the input).
func TestDecodeRDBStreams(t *testing.T) {
	data, err := os.ReadFile(rdbfixture.Path("redis-7.0.15"))
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	half := len(data) / 2
	firstBatch := make(chan struct{})
	var secondHalfSent atomic.Bool
	go func() {
		pw.Write(data[:half])
		select {
		case <-firstBatch:
		case <-time.After(10 * time.Second):
		}
		secondHalfSent.Store(true)
		pw.Write(data[half:])
		pw.Close()
	}()
	var batches int
	_, err = DecodeRDB(context.Background(), pr, RDBOptions{BatchRows: 3}, func(rows []Row) error {
		if batches++; batches == 1 {
			if secondHalfSent.Load() {
				t.Error("the first batch came only after the whole snapshot was sent")
			}
			close(firstBatch)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if batches < 2 {
		t.Fatalf("%d batches", batches)
	}
}
