package server

import (
	"bytes"
	"context"
	"encoding/json"
	"log"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/internal/coldtest"
)

// metricValue is the value of a series of the /metrics page (the whole
// line up to the value, e.g. `sluice_coldtier_degraded{table="events"}`).
func metricValue(page, series string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(page)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

// TestColdCommitFailuresDegrade: a table whose Iceberg commits fail (here
// the node's S3 secret is not the server's: every upload is refused) is
// degraded in /readyz with the cause, since when and how many runs failed
// in a row, and in GET /v1/tables/{table}; the node stays ready (200: it
// still stores what comes) and the metrics say how far the Iceberg table
// is behind. The failure is logged at ERROR once, not at each run. Once the
// credentials are right (the S3 server restarted on its address with the
// node's secret) the next run commits and it all clears.
func TestColdCommitFailuresDegrade(t *testing.T) {
	dir := t.TempDir()
	s3, err := coldtest.StartS3With(dir, coldtest.S3Options{})
	coldtest.Require(t, err)
	defer func() { s3.Stop() }()
	const nodeSecret = "not-the-server-secret"
	t.Setenv("AWS_ACCESS_KEY_ID", coldtest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", nodeSecret)
	t.Setenv("AWS_REGION", coldtest.Region)
	cfg := strings.Replace(testConfig, "    on_bad_line: reject\n", "    on_bad_line: reject\n"+
		"    compact:\n      interval: 100ms\n      after: 1h\n      iceberg:\n        warehouse: s3://"+coldtest.Bucket+"/health\n"+
		"        continuous: true\n        s3: {endpoint: \""+s3.Endpoint+"\", path_style: true}\n", 1)
	s := startServer(t, cfg, "")
	rows := `{"user":"ann","ts":"2024-05-01T10:00:00Z","n":1}` + "\n" + `{"user":"bob","ts":"2024-05-01T10:00:01Z","n":2}` + "\n"
	if code, res, _ := post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(rows)); code != 200 {
		t.Fatalf("ingest: %d %v", code, res)
	}

	// Degraded, with the cause, after a few failed runs.
	deadline := time.Now().Add(30 * time.Second)
	var body string
	for {
		var code int
		code, body = get(t, s.url+"/readyz")
		if code != http.StatusOK {
			t.Fatalf("/readyz %d with failing commits, want 200 (the node still ingests): %s", code, body)
		}
		if m := regexp.MustCompile(`degraded: table "events" cold tier: commits failing since \S+ \((\d+) consecutive failures\): (.+)`).FindStringSubmatch(body); m != nil && m[1] != "1" {
			if !strings.Contains(m[2], "403") && !strings.Contains(m[2], "SignatureDoesNotMatch") {
				t.Errorf("the cause in /readyz does not say the upload was refused: %s", m[2])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after 30s of failing commits: %s\nlog: %s", body, s.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("/readyz: %s", strings.TrimSpace(body))
	if strings.Contains(body, "refuses writes") {
		t.Errorf("a failing cold tier reads as a table that refuses writes: %s", body)
	}
	var info TableInfo
	if _, b := get(t, s.url+"/v1/tables/events"); json.Unmarshal([]byte(b), &info) != nil || info.Cold == nil ||
		!info.Cold.Degraded || info.Cold.ConsecutiveFailures < 2 || info.Cold.FailingSince == nil || info.Cold.LastError == "" || info.Cold.LastCommit != nil || info.Degraded != "" {
		t.Errorf("GET /v1/tables/events with failing commits: %s", b)
	}
	_, page := get(t, s.url+"/metrics")
	if v, ok := metricValue(page, `sluice_coldtier_degraded{table="events"}`); !ok || v != 1 {
		t.Errorf("sluice_coldtier_degraded %v (%v), want 1", v, ok)
	}
	if v, ok := metricValue(page, `sluice_coldtier_consecutive_failures{table="events"}`); !ok || v < 2 {
		t.Errorf("sluice_coldtier_consecutive_failures %v (%v), want 2 or more", v, ok)
	}
	if v, ok := metricValue(page, `sluice_coldtier_lag_seconds{table="events"}`); !ok || v <= 0 {
		t.Errorf("sluice_coldtier_lag_seconds %v (%v), want above 0 (rows wait)", v, ok)
	}
	if _, ok := metricValue(page, `sluice_coldtier_last_commit_timestamp_seconds{table="events"}`); ok {
		t.Error("sluice_coldtier_last_commit_timestamp_seconds before any commit")
	}
	if n := strings.Count(s.logs.String(), `level=ERROR msg="compaction to iceberg`); n != 1 {
		t.Errorf("%d ERROR lines for the failing runs, want 1 (then once a minute):\n%s", n, s.logs.String())
	}

	// The credentials become right: the next run commits, and it clears.
	addr := strings.TrimPrefix(s3.Endpoint, "http://")
	s3.Stop()
	s3, err = coldtest.StartS3With(dir, coldtest.S3Options{Addr: addr, AccessKey: coldtest.AccessKey, SecretKey: nodeSecret})
	if err != nil {
		t.Fatal(err)
	}
	beforeFix := time.Now()
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, body := get(t, s.url+"/readyz")
		if code == http.StatusOK && !strings.Contains(body, "cold tier") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz 30s after the credentials were fixed: %d %s\nlog: %s", code, body, s.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, page = get(t, s.url+"/metrics")
	if v, ok := metricValue(page, `sluice_coldtier_degraded{table="events"}`); !ok || v != 0 {
		t.Errorf("sluice_coldtier_degraded %v (%v) after a commit, want 0", v, ok)
	}
	if v, ok := metricValue(page, `sluice_coldtier_consecutive_failures{table="events"}`); !ok || v != 0 {
		t.Errorf("sluice_coldtier_consecutive_failures %v (%v) after a commit, want 0", v, ok)
	}
	if v, ok := metricValue(page, `sluice_coldtier_last_commit_timestamp_seconds{table="events"}`); !ok || v < float64(beforeFix.Unix()) {
		t.Errorf("sluice_coldtier_last_commit_timestamp_seconds %v (%v), want after %d", v, ok, beforeFix.Unix())
	}
	if v, ok := metricValue(page, `sluice_coldtier_lag_seconds{table="events"}`); !ok || v != 0 {
		t.Errorf("sluice_coldtier_lag_seconds %v (%v) with every row committed, want 0", v, ok)
	}
	if !strings.Contains(s.logs.String(), `msg="compaction to iceberg succeeds again"`) {
		t.Errorf("no line says the commits work again:\n%s", s.logs.String())
	}
	// The rows are in the Iceberg table: the query reads both tiers.
	if code, res, _ := post(t, s.url+"/v1/tables/events/compact", "application/json", nil); code != 200 {
		t.Fatalf("compact after the fix: %d %v", code, res)
	}
}

// TestProcessLogTakesLogPackage: with ProcessLog, what a library writes
// with the standard log package (iceberg-go's warnings) is a line of the
// server's handler, not plain text on stderr.
func TestProcessLogTakesLogPackage(t *testing.T) {
	prev, prevFlags := slog.Default(), log.Flags()
	t.Cleanup(func() {
		slog.SetDefault(prev)
		log.SetOutput(os.Stderr)
		log.SetFlags(prevFlags)
	})
	cfg, err := config.Parse([]byte(testConfig), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s, err := New(context.Background(), cfg, Options{StorageDir: t.TempDir(), ProcessLog: true,
		Logger: slog.New(slog.NewJSONHandler(&lockedWriter{w: &out}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	log.Printf("WARNING: dropped table %s but failed to purge files", "t")
	var rec map[string]any
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rec); err != nil || rec["msg"] != "WARNING: dropped table t but failed to purge files" {
		t.Errorf("the log package's line through the server's handler: %q (%v)", lines[len(lines)-1], err)
	}
}
