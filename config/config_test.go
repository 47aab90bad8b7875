package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const good = `
storage:
  dir: store
listen:
  http: 127.0.0.1:9999
tables:
  - name: events
    hashBy: user
    sortBy: ts
    ttl: 720h
    schema:
      - {name: user, type: string}
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
    filters:
      - name: not_test
        func: "function main(row) return row.user ~= 'test' end"
    computed:
      - name: double
        type: int64
        func: "function main(row) return row.n * 2 end"
    compact:
      interval: 1m
      dir: parquet
  - name: raw-logs
`

func TestParseGood(t *testing.T) {
	cfg, err := Parse([]byte(good), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	ev, ok := cfg.Table("events")
	if !ok {
		t.Fatal("no table events")
	}
	if ev.HashBy != "user" || ev.SortBy != "ts" || ev.TTL != 720*time.Hour || len(ev.Schema) != 3 {
		t.Fatalf("events = %+v", ev)
	}
	if len(ev.Computed) != 1 || ev.Computed[0].Name != "double" || len(ev.Filters) != 1 {
		t.Fatalf("computed columns and filters not read: %+v %+v", ev.Computed, ev.Filters)
	}
	if ev.Compact.Interval != time.Minute || ev.Compact.After != DefaultCompactAfter || ev.OnBadLine != "reject" {
		t.Fatalf("compact/defaults = %+v %q", ev.Compact, ev.OnBadLine)
	}
	if cfg.Limits.MaxBodyBytes != DefaultMaxBodyBytes || cfg.Listen.HTTP != "127.0.0.1:9999" {
		t.Fatalf("limits/listen = %+v %+v", cfg.Limits, cfg.Listen)
	}
}

func TestEnvOverrides(t *testing.T) {
	env := map[string]string{
		"SLUICE_STORAGE_DIR":                        "/tmp/elsewhere",
		"SLUICE_LISTEN_HTTP":                        "127.0.0.1:7000",
		"SLUICE_LISTEN_PPROF":                       "true",
		"SLUICE_LIMITS_MAX_BODY_BYTES":              "1024",
		"SLUICE_TABLES_EVENTS_TTL":                  "1h",
		"SLUICE_TABLES_RAW_LOGS_ON_BAD_LINE":        "skip",
		"SLUICE_TABLES_0_COMPACT_REMOVE":            "true",
		"SLUICE_TABLES_EVENTS_COMPUTED_DOUBLE_FUNC": "function main(row) return row.n * 3 end",
	}
	cfg, err := Parse([]byte(good), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := cfg.Table("events")
	raw, _ := cfg.Table("raw-logs")
	if cfg.Storage.Dir != "/tmp/elsewhere" || cfg.Listen.HTTP != "127.0.0.1:7000" || !cfg.Listen.Pprof || cfg.Limits.MaxBodyBytes != 1024 {
		t.Fatalf("top-level overrides not applied: %+v %+v %+v", cfg.Storage, cfg.Listen, cfg.Limits)
	}
	if ev.TTL != time.Hour || !ev.Compact.Remove || raw.OnBadLine != "skip" {
		t.Fatalf("table overrides not applied: ttl %v remove %v raw %q", ev.TTL, ev.Compact.Remove, raw.OnBadLine)
	}
	if !strings.Contains(ev.Computed[0].Func, "* 3") {
		t.Fatalf("computed func not overridden: %q", ev.Computed[0].Func)
	}
}

func TestEveryProblemReported(t *testing.T) {
	bad := `
listen: {http: "nocolon"}
limits: {max_inflight: -1}
tables:
  - name: a
    hashBy: missing
    schema: [{name: x, type: complex}]
    on_bad_line: maybe
    ttl: -1h
    computed:
      - {name: c, type: nosuchtype, func: "function main(r) return 1 end"}
    compact: {interval: 1m}
  - name: a
  - name: "bad/name"
`
	env := map[string]string{"SLUICE_LIMITS_READ_TIMEOUT": "soon"}
	_, err := Parse([]byte(bad), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		`listen.http "nocolon"`, "limits.max_inflight", `hashBy "missing"`, `schema[0] "x"`, `unknown type "complex"`,
		`on_bad_line "maybe"`, "ttl: negative", "compact.dir: required",
		"duplicate table name", `"bad/name"`, "SLUICE_LIMITS_READ_TIMEOUT",
		// the computed column's unknown type is package compute's to find
		// (server.ValidateOptions): cmd/internal/cli's
		// TestValidateReportsEveryLayersProblems runs this config whole
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %q:\n%s", want, msg)
		}
	}
}

func TestUnknownFieldAndLoad(t *testing.T) {
	if _, err := Parse([]byte("tables: [{name: a, hashby: x}]"), nil); err == nil || !strings.Contains(err.Error(), "hashby") {
		t.Fatalf("typo not reported: %v", err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(p, []byte("tables: [{name: a}]"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BaseDir != dir || cfg.Storage.Dir != DefaultStorageDir {
		t.Fatalf("base dir %q, storage dir %q", cfg.BaseDir, cfg.Storage.Dir)
	}
}

// FuzzParse: any YAML parses or fails with an error (no panic), and a
// config that parses validates.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("tables: [{name: a, ttl: 1h, compact: {interval: 1m, dir: x}}]"))
	f.Add([]byte("listen: {http: ':0'}\ntables: [{name: b, schema: [{name: t, type: time}]}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, func(string) (string, bool) { return "", false })
		if err == nil {
			if verr := cfg.Validate(); verr != nil {
				t.Fatalf("parsed but invalid: %v", verr)
			}
		}
	})
}

// A mistyped SLUICE_ override used to be ignored in silence: it is a
// warning naming the variable and the nearest real one; real overrides and
// the harness's own variables are not.
func TestUnknownEnvIsWarned(t *testing.T) {
	t.Setenv("SLUICE_LIMITS_MAX_BODY_BYTE", "5")
	t.Setenv("SLUICE_TABLES_EVNTS_TTL", "1h")
	t.Setenv("SLUICE_LISTEN_HTTP", "127.0.0.1:9")
	t.Setenv("SLUICE_TEST_WHATEVER", "1")
	cfg, err := Parse([]byte("tables:\n  - name: events\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen.HTTP != "127.0.0.1:9" {
		t.Fatalf("override not applied: %q", cfg.Listen.HTTP)
	}
	got := strings.Join(cfg.Warnings, "\n")
	for _, want := range []string{
		"SLUICE_LIMITS_MAX_BODY_BYTE matches no config field", "did you mean SLUICE_LIMITS_MAX_BODY_BYTES?",
		"SLUICE_TABLES_EVNTS_TTL matches no config field", "did you mean SLUICE_TABLES_EVENTS_TTL?",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "SLUICE_LISTEN_HTTP") || strings.Contains(got, "SLUICE_TEST_") || len(cfg.Warnings) != 2 {
		t.Errorf("warnings %q: want exactly the two mistyped names", got)
	}
}

// YAML indentation errors name the line at fault, not the line where the
// enclosing block starts (yaml.v3 reports the latter).
func TestYAMLIndentationErrorNamesTheLine(t *testing.T) {
	for _, c := range []struct {
		yaml string
		line int
	}{
		{"storage:\n  dir: x\ntables:\n  - name: a\n    ttl: 1h\n   sortBy: ts\n", 6},
		{"storage:\n  dir: x\n listen:\n   http: a\n", 3},
		{"storage:\n  dir: x\nlimits:\n    max_body_bytes: 5\n  read_timeout: 3s\n", 5},
		{"tables:\n  - name: a\n    computed:\n      - name: x\n        type: int64\n       func: f\n", 6},
		{"tables:\n  - name: a\n     ttl: 1h\n", 3},
	} {
		_, err := Parse([]byte(c.yaml), func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("line %d:", c.line)) {
			t.Errorf("%q: %v, want line %d named", c.yaml, err, c.line)
		}
	}
}

func TestSourcesValidated(t *testing.T) {
	good := `
tables:
  - name: events
    sources:
      - kafka: {brokers: [127.0.0.1:9092], topics: [events], group: sluice-events, format: ndjson, metadata: [key, headers]}
      - nats: {url: "nats://127.0.0.1:4222", stream: EVENTS, subject: "events.>", durable: sluice}
`
	cfg, err := Parse([]byte(good), func(k string) (string, bool) {
		if k == "SLUICE_TABLES_EVENTS_SOURCES_0_KAFKA_INSTANCE_ID" {
			return "node-1", true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Tables[0].Sources[0].Kafka.InstanceID; got != "node-1" {
		t.Fatalf("instance_id from the environment: %q", got)
	}
	bad := `
tables:
  - name: events
    sources:
      - kafka: {brokers: [nohost], topics: [], format: xml, metadata: [colour]}
      - nats: {url: "", stream: ""}
      - {}
`
	_, err = Parse([]byte(bad), func(string) (string, bool) { return "", false })
	if err == nil {
		t.Fatal("bad sources accepted")
	}
	for _, want := range []string{`broker "nohost"`, "topics: none", "group: empty", `format "xml"`, `metadata "colour"`, `sources[1] nats: url`, "stream: empty", "durable: empty", "sources[2]: set kafka, nats or s3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestKeyPartitionedValidated(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	good := `
tables:
  - name: events
    hashBy: user
    schema: [{name: user, type: string}]
    sources:
      - kafka: {brokers: [127.0.0.1:9092], topics: [events], group: g, key_partitioned: true}
`
	if _, err := Parse([]byte(good), env); err != nil {
		t.Fatal(err)
	}
	bad := `
tables:
  - name: events
    hashBy: score
    schema: [{name: score, type: float64}]
    sources:
      - kafka: {brokers: [127.0.0.1:9092], topics: [events], group: g, key_partitioned: true}
      - nats: {url: "nats://127.0.0.1:4222", stream: EVENTS, durable: d}
  - name: nohash
    sources:
      - kafka: {brokers: [127.0.0.1:9092], topics: [events], group: g2, key_partitioned: true}
  - name: untyped
    hashBy: user
    sources:
      - kafka: {brokers: [127.0.0.1:9092], topics: [events], group: g3, key_partitioned: true}
`
	_, err := Parse([]byte(bad), env)
	if err == nil {
		t.Fatal("bad key_partitioned accepted")
	}
	for _, want := range []string{`hashBy column "score" is float64`, "sources[1] is not a key_partitioned kafka source", "the table has no hashBy column", `hashBy column "user" has no declared type`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestSchemaRegistryValidated: the registry formats need schema_registry,
// the other formats refuse it, and its URLs and credentials are checked.
func TestSchemaRegistryValidated(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	t.Setenv("P", "secret")
	t.Setenv("T", "secret")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := `
tables:
  - name: events
    sources:
      - kafka: {brokers: [127.0.0.1:9092], topics: [a], group: g, format: avro, schema_registry: {urls: ["https://r:8081"], username: u, password: {env: P}}}
      - kafka: {brokers: [127.0.0.1:9092], topics: [b], group: g, format: protobuf, schema_registry: {urls: ["http://r:8081"], token: {file: TOKEN}}}
      - kafka: {brokers: [127.0.0.1:9092], topics: [c], group: g, format: json_schema, schema_registry: {urls: ["http://r:8081"]}}
      - nats: {url: "nats://127.0.0.1:4222", stream: S, durable: d, format: avro, schema_registry: {urls: ["http://r:8081"]}}
`
	if _, err := Parse([]byte(strings.Replace(good, "TOKEN", tokenFile, 1)), env); err != nil {
		t.Fatal(err)
	}
	bad := `
tables:
  - name: events
    sources:
      - kafka: {brokers: [127.0.0.1:9092], topics: [a], group: g, format: avro}
      - kafka: {brokers: [127.0.0.1:9092], topics: [b], group: g, schema_registry: {urls: ["http://r:8081"]}}
      - kafka: {brokers: [127.0.0.1:9092], topics: [c], group: g, format: protobuf, schema_registry: {urls: ["r:8081"], username: u, password: {env: P}, token: {env: T}, timeout: -1s}}
      - kafka: {brokers: [127.0.0.1:9092], topics: [d], group: g, format: json_schema, schema_registry: {urls: [], password: {env: P}}}
      - nats: {url: "nats://127.0.0.1:4222", stream: S, durable: d, format: protobuf}
      - nats: {url: "nats://127.0.0.1:4222", stream: S, durable: d, schema_registry: {urls: ["http://r:8081"]}}
      - nats: {url: "nats://127.0.0.1:4222", stream: S, durable: d, format: avro, schema_registry: {urls: ["r:8081"]}}
`
	_, err := Parse([]byte(bad), env)
	if err == nil {
		t.Fatal("bad schema registries accepted")
	}
	for _, want := range []string{
		"sources[0] kafka: format avro: schema_registry: missing",
		"sources[1] kafka: schema_registry: only the formats [avro protobuf json_schema] use it",
		`sources[2] kafka schema_registry: url "r:8081"`, "sources[2] kafka schema_registry: token or username and password, not both",
		"sources[2] kafka schema_registry: timeout must not be negative",
		"sources[3] kafka schema_registry: urls: none", "sources[3] kafka schema_registry: password without username",
		"sources[4] nats: format protobuf: schema_registry: missing",
		"sources[5] nats: schema_registry: only the formats [avro protobuf json_schema] use it",
		`sources[6] nats schema_registry: url "r:8081"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
