package cli

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/rdbfixture"
	"github.com/sluicedb/sluice/server"
)

const keysConfig = `
tables:
  - name: keys
    hashBy: db
    computed:
      - name: big
        type: bool
        func: "function main(row) return row.memory_bytes >= 1000 end"
`

func writeKeysConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte(keysConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// ingestReport parses `sluice ingest`'s "SRC: {json}" line.
func ingestReport(t *testing.T, out string) map[string]any {
	t.Helper()
	i := strings.Index(out, ": {")
	if i < 0 {
		t.Fatalf("no report in %q", out)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out[i+2:])), &m); err != nil {
		t.Fatalf("report %q: %v", out, err)
	}
	return m
}

func fixtureKeys(t *testing.T, keep func(rdbfixture.Key) bool) []string {
	t.Helper()
	fx, err := rdbfixture.Load("redis-7.0.15")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range fx.Keys {
		if keep(k) {
			out = append(out, k.Key)
		}
	}
	sort.Strings(out)
	return out
}

func queryKeys(t *testing.T, out string) []string {
	t.Helper()
	var keys []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		keys = append(keys, m["key"].(string))
	}
	sort.Strings(keys)
	return keys
}

// TestIngestRDBStraightIntoStore: `sluice ingest` of a real-server
// snapshot (by its .rdb extension, and with --format rdb) into a store
// directory, with a db filter and the table's computed column.
func TestIngestRDBStraightIntoStore(t *testing.T) {
	cfg, data := writeKeysConfig(t), t.TempDir()
	want := fixtureKeys(t, func(k rdbfixture.Key) bool { return k.DB == 1 })
	out := runServeCLI(t, "ingest", "--config", cfg, "--data", data, "--table", "keys", "--db", "1", "--no-progress", fixture)
	if rep := ingestReport(t, out); rep["accepted"] != float64(len(want)) || rep["keys"] != float64(len(want)) {
		t.Fatalf("report %v: want %d keys of db 1", rep, len(want))
	}
	got := queryKeys(t, runServeCLI(t, "query", "--config", cfg, "--data", data, "--table", "keys"))
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("stored %q, want %q", got, want)
	}
	// --format rdb on a name without the extension, prefix and type filters.
	named := filepath.Join(t.TempDir(), "snapshot.bin")
	raw, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(named, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	data2 := t.TempDir()
	want = fixtureKeys(t, func(k rdbfixture.Key) bool { return strings.HasPrefix(k.Key, "zset:") && k.Type == "zset" })
	out = runServeCLI(t, "ingest", "--config", cfg, "--data", data2, "--table", "keys", "--format", "rdb", "--prefix", "zset:", "--type", "zset", "--batch", "2", named)
	if rep := ingestReport(t, out); rep["accepted"] != float64(len(want)) {
		t.Fatalf("report %v: want %d zsets", rep, len(want))
	}
	out = runServeCLI(t, "query", "--config", cfg, "--data", data2, "--table", "keys")
	if got := queryKeys(t, out); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("stored %q, want %q", got, want)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		json.Unmarshal([]byte(l), &m)
		if m["big"] != (m["memory_bytes"].(float64) >= 1000) {
			t.Errorf("computed column big = %v for memory_bytes %v", m["big"], m["memory_bytes"])
		}
	}
}

// startTestServer runs a real server in-process on a 127.0.0.1 port.
func startTestServer(t *testing.T, yaml string) string {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(context.Background(), cfg, server.Options{StorageDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// TestIngestRDBThroughServer: `sluice ingest --server` streams the
// snapshot to a running server, which applies the filters.
func TestIngestRDBThroughServer(t *testing.T) {
	url := startTestServer(t, keysConfig)
	want := fixtureKeys(t, func(k rdbfixture.Key) bool { return k.Type == "hash" })
	out := runServeCLI(t, "ingest", "--server", url, "--table", "keys", "--type", "hash", "--batch", "2", fixture)
	if rep := ingestReport(t, out); rep["accepted"] != float64(len(want)) || rep["batches"] != float64((len(want)+1)/2) {
		t.Fatalf("report %v: want %d hashes in batches of 2", rep, len(want))
	}
	got := queryKeys(t, runServeCLI(t, "query", "--server", url, "--table", "keys", "--columns", "key"))
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("stored %q, want %q", got, want)
	}
}

// TestIngestRDBTruncatedExitsNonZero: a truncated snapshot with --mode
// stream, straight into a store and through a server: non-zero exit, an
// error naming the file, offset and key, and the complete batches before
// the cut stored.
func TestIngestRDBTruncatedExitsNonZero(t *testing.T) {
	raw, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.rdb")
	if err := os.WriteFile(cut, raw[:len(raw)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	where := regexp.MustCompile(`key \\?".+\\?" at offset \d+`)
	check := func(t *testing.T, stdout, stderr string, code int, stored func() int) {
		t.Helper()
		if code == 0 {
			t.Fatalf("exit 0 on a truncated snapshot; stderr %q", stderr)
		}
		if !strings.Contains(stderr, "cut.rdb") || !where.MatchString(stderr) || !strings.Contains(stderr, "truncated") {
			t.Errorf("stderr %q does not name the file, key, offset and truncation", stderr)
		}
		// A failed ingest prints nothing on stdout; the error says what
		// stayed stored.
		m := regexp.MustCompile(`(\d+) rows were accepted and stored before the error, mode stream`).FindStringSubmatch(stderr)
		if stdout != "" || m == nil {
			t.Fatalf("stdout %q, stderr %q: want nothing on stdout and the rows stored in the error", stdout, stderr)
		}
		accepted, _ := strconv.Atoi(m[1])
		if accepted == 0 || accepted%4 != 0 || stored() != accepted {
			t.Errorf("%d rows accepted, %d stored: want the complete batches of 4", accepted, stored())
		}
	}
	t.Run("store", func(t *testing.T) {
		cfg, data := writeKeysConfig(t), t.TempDir()
		stdout, stderr, code := runCLI(t, "ingest", "--config", cfg, "--data", data, "--table", "keys", "--batch", "4", "--mode", "stream", cut)
		check(t, stdout, stderr, code, func() int {
			return len(queryKeys(t, runServeCLI(t, "query", "--config", cfg, "--data", data, "--table", "keys")))
		})
	})
	t.Run("server", func(t *testing.T) {
		url := startTestServer(t, keysConfig)
		stdout, stderr, code := runCLI(t, "ingest", "--server", url, "--table", "keys", "--batch", "4", "--mode", "stream", cut)
		if !strings.Contains(stderr, "400") {
			t.Errorf("stderr %q: want the server's 400", stderr)
		}
		check(t, stdout, stderr, code, func() int {
			return len(queryKeys(t, runServeCLI(t, "query", "--server", url, "--table", "keys", "--columns", "key")))
		})
	})
}

// TestIngestRDBAllOrNothing: by default (--mode atomic) a snapshot cut
// short and one with a byte of a value flipped (its CRC64 fails at the end)
// exit non-zero and store nothing, straight into a store and through a
// server, though many batches were read; the report says the mode. The good
// snapshot ingested after them stores each key once.
func TestIngestRDBAllOrNothing(t *testing.T) {
	raw, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	fx, err := rdbfixture.Load("redis-7.0.15")
	if err != nil {
		t.Fatal(err)
	}
	flipped, err := fx.FlipInValue(raw)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cut, flip := filepath.Join(dir, "cut.rdb"), filepath.Join(dir, "flipped.rdb")
	if err := os.WriteFile(cut, raw[:len(raw)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(flip, flipped, 0o644); err != nil {
		t.Fatal(err)
	}
	// The key column holds a key that is not UTF-8 with U+FFFD for each bad
	// byte in the JSON answer (key_base64 has its bytes).
	var want []string
	for _, k := range fixtureKeys(t, func(rdbfixture.Key) bool { return true }) {
		want = append(want, strings.Map(func(r rune) rune { return r }, k)) // each bad byte becomes U+FFFD
	}
	sort.Strings(want)
	run := func(t *testing.T, route []string, stored func() []string) {
		for _, bad := range []struct{ path, want string }{{cut, "truncated"}, {flip, "checksum mismatch"}} {
			stdout, stderr, code := runCLI(t, append(append([]string{"ingest"}, route...), "--table", "keys", "--batch", "4", bad.path)...)
			if code == 0 || !strings.Contains(stderr, bad.want) || !strings.Contains(stderr, "nothing of the snapshot was stored") {
				t.Fatalf("%s: exit %d, stderr %q", bad.path, code, stderr)
			}
			m := regexp.MustCompile(`(\d+) batches read, none stored, mode atomic`).FindStringSubmatch(stderr)
			if stdout != "" || m == nil {
				t.Fatalf("%s: stdout %q, stderr %q: want nothing on stdout, the batches read and the mode in the error", bad.path, stdout, stderr)
			}
			if n, _ := strconv.Atoi(m[1]); n < 3 {
				t.Errorf("%s: %d batches read: want several before the failure", bad.path, n)
			}
			if got := stored(); len(got) != 0 {
				t.Fatalf("%s: %d rows stored", bad.path, len(got))
			}
		}
		out := runServeCLI(t, append(append([]string{"ingest"}, route...), "--table", "keys", "--batch", "4", fixture)...)
		if rep := ingestReport(t, out); rep["mode"] != "atomic" || rep["accepted"] != float64(len(want)) {
			t.Fatalf("good snapshot: report %v, want mode atomic, %d accepted", rep, len(want))
		}
		// Keys repeat across databases: the fixture's list has each as often.
		if got := stored(); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("stored %d keys, want each of the %d keys once", len(got), len(want))
		}
	}
	t.Run("store", func(t *testing.T) {
		cfg, data := writeKeysConfig(t), t.TempDir()
		run(t, []string{"--config", cfg, "--data", data}, func() []string {
			return queryKeys(t, runServeCLI(t, "query", "--config", cfg, "--data", data, "--table", "keys"))
		})
	})
	t.Run("server", func(t *testing.T) {
		url := startTestServer(t, keysConfig)
		run(t, []string{"--server", url}, func() []string {
			return queryKeys(t, runServeCLI(t, "query", "--server", url, "--table", "keys", "--columns", "key"))
		})
	})
}

// TestIngestRDBTableDefaults: the table's rdb: section applies in both
// routes when no flag is given (its type filter and batch size), a flag
// narrowing it is taken, one outside it fails, and `sluice validate`
// reports a bad section.
func TestIngestRDBTableDefaults(t *testing.T) {
	const yaml = `
tables:
  - name: keys
    rdb: {type: [hash, zset], batch: 2}
`
	cfg := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	url := startTestServer(t, yaml)
	both := fixtureKeys(t, func(k rdbfixture.Key) bool { return k.Type == "hash" || k.Type == "zset" })
	hashes := fixtureKeys(t, func(k rdbfixture.Key) bool { return k.Type == "hash" })
	routes := map[string][]string{"store": {"--config", cfg, "--data", t.TempDir()}, "server": {"--server", url}}
	for route, to := range routes {
		args := append([]string{"ingest", "--table", "keys", "--no-progress"}, to...)
		out := runServeCLI(t, append(args, fixture)...)
		if rep := ingestReport(t, out); rep["accepted"] != float64(len(both)) || rep["batches"] != float64((len(both)+1)/2) {
			t.Errorf("%s, no flags: report %v, want %d hashes and zsets in batches of 2", route, rep, len(both))
		}
		out = runServeCLI(t, append(args, "--type", "hash", "--batch", "1000", fixture)...)
		if rep := ingestReport(t, out); rep["accepted"] != float64(len(hashes)) || rep["batches"] != 1.0 {
			t.Errorf("%s, --type hash --batch 1000: report %v, want %d hashes in one batch", route, rep, len(hashes))
		}
		if _, stderr, code := runCLI(t, append(args, "--type", "set", fixture)...); code == 0 || !strings.Contains(stderr, "type set: not among") {
			t.Errorf("%s, --type set: exit %d, stderr %q: want a failure naming the type", route, code, stderr)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("tables:\n  - name: keys\n    rdb: {type: [tree], db: [-1]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "validate", "--config", bad)
	if code == 0 || !strings.Contains(stderr+out, `rdb.type[0] "tree"`) || !strings.Contains(stderr+out, "rdb.db[0]: negative") {
		t.Errorf("validate of a bad rdb: section: exit %d, output %q %q", code, out, stderr)
	}
}
