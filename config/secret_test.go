package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The inline secrets of secretsConfig: none may appear in any output.
var inlineSecrets = []string{"kafka-inline-Pa55", "nats-inline-t0ken", "rest-inline-t0ken", "pg-inline-Pa55"}

const secretsConfig = `
tables:
  - name: events
    sortBy: ts
    sources:
      - kafka:
          brokers: [kafka.example:9093]
          topics: [events]
          group: sluice
          tls: {ca_file: /etc/ca.pem}
          sasl: {mechanism: SCRAM-SHA-512, username: sluice, password: kafka-inline-Pa55}
      - nats: {url: "tls://nats.example:4222", stream: EVENTS, durable: sluice, token: nats-inline-t0ken}
      - kafka:
          brokers: [kafka.example:9093]
          topics: [events]
          group: sluice
          tls: {}
          sasl: {mechanism: PLAIN, username: sluice, password: {file: /run/secrets/kafka}}
    compact:
      remove: true
      iceberg:
        warehouse: s3://lake/sluice
        catalog: {type: rest, uri: "https://catalog.example", token: rest-inline-t0ken}
  - name: logs
    sortBy: ts
    compact:
      remove: true
      iceberg:
        warehouse: s3://lake/sluice
        catalog: {type: sql, uri: "postgres://sluice@pg.example/iceberg?sslmode=verify-full", password: pg-inline-Pa55}
`

// noSecret fails for every inline secret in out.
func noSecret(t *testing.T, what, out string) {
	t.Helper()
	for _, s := range inlineSecrets {
		if strings.Contains(out, s) {
			t.Errorf("%s shows the secret %q:\n%s", what, s, out)
		}
	}
}

// TestSecretsNeverPrinted: a config with inline secrets printed by fmt
// (%v, %+v, %#v), encoded as JSON and YAML, and logged by slog shows where
// each secret comes from and never a value; Reveal gives the values.
func TestSecretsNeverPrinted(t *testing.T) {
	cfg, err := Parse([]byte(secretsConfig), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	sasl := cfg.Tables[0].Sources[0].Kafka.SASL
	if v, err := sasl.Password.Reveal(); err != nil || v != "kafka-inline-Pa55" {
		t.Fatalf("Reveal = %q, %v", v, err)
	}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		noSecret(t, "fmt "+format, fmt.Sprintf(format, cfg))
		noSecret(t, "fmt "+format+" of the tables", fmt.Sprintf(format, cfg.Tables))
		noSecret(t, "fmt "+format+" of a sasl section", fmt.Sprintf(format, *sasl))
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	noSecret(t, "JSON", string(js))
	ym, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	noSecret(t, "YAML", string(ym))
	if !strings.Contains(string(ym), "file: /run/secrets/kafka") {
		t.Errorf("YAML does not keep the file reference:\n%s", ym)
	}
	var logged bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logged, nil))
	log.Info("config", "config", cfg, "sasl", sasl, "password", sasl.Password, "tables", cfg.Tables)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "config", cfg, "password", sasl.Password)
	noSecret(t, "slog", logged.String())
	if !strings.Contains(logged.String(), "(inline)") {
		t.Errorf("slog output does not say the secret is inline: %s", logged.String())
	}
}

// TestSecretErrorsNeverQuote: validation errors about sections holding
// secrets, and about a url with credentials in it, name the key and never
// a value.
func TestSecretErrorsNeverQuote(t *testing.T) {
	bad := strings.NewReplacer(
		"          tls: {}\n", "", // PLAIN without tls
		`url: "tls://nats.example:4222"`, `url: "nats://u:nats-inline-t0ken@nats.example:4222"`, // credentials in a url
		"mechanism: SCRAM-SHA-512", "mechanism: SCRAM-SHA-1", // an unknown mechanism
		`uri: "https://catalog.example", token`, `uri: "https://catalog.example", password: pg-inline-Pa55, credential: x, token`,
	).Replace(secretsConfig)
	_, err := Parse([]byte(bad), func(string) (string, bool) { return "", false })
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"PLAIN without tls", "url: holds credentials", `mechanism "SCRAM-SHA-1"`, "token and credential: set one", "password: for a sql catalog"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	noSecret(t, "the validation error", err.Error())
}

// TestSecretForms: {env: NAME} and {file: PATH} are read at Reveal (a
// rewritten file gives the new value), a trailing newline dropped; an
// unset variable is a validation error naming it; both forms at once, or
// secrets in plain catalog properties, are refused.
func TestSecretForms(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLUICE_TEST_SECRET", "from-env")
	var s struct {
		A, B, C Secret
	}
	if err := yaml.Unmarshal(fmt.Appendf(nil, "a: {env: SLUICE_TEST_SECRET}\nb: {file: %s}\nc: plain\n", file), &s); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s          Secret
		want, form string
	}{{s.A, "from-env", "env:SLUICE_TEST_SECRET"}, {s.B, "from-file", "file:" + file}, {s.C, "plain", "(inline)"}} {
		if v, err := c.s.Reveal(); err != nil || v != c.want {
			t.Errorf("%v: Reveal = %q, %v; want %q", c.s, v, err, c.want)
		}
		if c.s.String() != c.form {
			t.Errorf("String = %q, want %q", c.s.String(), c.form)
		}
	}
	if err := os.WriteFile(file, []byte("rotated"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.B.Reveal(); v != "rotated" {
		t.Errorf("after the file changed, Reveal = %q, want rotated", v)
	}
	if err := yaml.Unmarshal([]byte("a: {env: X, vault: y}\n"), &s); err == nil {
		t.Error("an unknown key in a secret mapping: no error")
	}
	if _, err := (Secret{Env: "SLUICE_TEST_UNSET_SECRET"}).Reveal(); !errors.Is(err, ErrSecretUnset) || !strings.Contains(err.Error(), "SLUICE_TEST_UNSET_SECRET") {
		t.Errorf("unset variable: %v", err)
	}
	cfg := strings.NewReplacer("password: kafka-inline-Pa55", "password: {env: SLUICE_TEST_UNSET_SECRET, file: /x}",
		"token: rest-inline-t0ken", "properties: {token: rest-inline-t0ken}").Replace(secretsConfig)
	_, err := Parse([]byte(cfg), func(string) (string, bool) { return "", false })
	for _, want := range []string{"set env or file, not both", "environment variable SLUICE_TEST_UNSET_SECRET is unset", "properties.token: a secret in plain properties"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	noSecret(t, "the validation error", fmt.Sprint(err))
}

// TestSecurityExamples: the configs of examples/security/ (the ones
// docs/security.md, "Outbound" shows) load, with the variables they name set.
func TestSecurityExamples(t *testing.T) {
	for _, name := range []string{"KAFKA_PASSWORD", "NATS_TOKEN", "ICEBERG_REST_CREDENTIAL"} {
		t.Setenv(name, "x")
	}
	paths, err := filepath.Glob("../examples/security/outbound-*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples/security/outbound-*.yaml: %v", err)
	}
	for _, p := range paths {
		cfg, err := Load(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if len(cfg.Warnings) > 0 {
			t.Errorf("%s: warnings %v", p, cfg.Warnings)
		}
	}
}
