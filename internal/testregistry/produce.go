package testregistry

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/sluicedb/sluice/internal/testenv"
)

var errNoClients = errors.New("the schema registry clients are not installed (scripts/install-schema-registry)")

//go:embed produce.py
var produceScript string

// ClientsDir is where scripts/install-schema-registry installs the
// serializers.
func ClientsDir() string {
	return filepath.Join(cacheDir(), "schema-registry-clients-2.16.1")
}

// cacheDir is where scripts/install-schema-registry installs (the same
// rule as the script: $SLUICE_CACHE_DIR, else $XDG_CACHE_HOME/sluice,
// else ~/.cache/sluice).
func cacheDir() string {
	if d := os.Getenv("SLUICE_CACHE_DIR"); d != "" {
		return d
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = "/tmp"
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "sluice")
}

// Python returns the Python that has the serializers. It never installs
// (scripts/test runs scripts/install-schema-registry first).
func Python() (string, error) {
	dir := ClientsDir()
	if _, err := os.Stat(filepath.Join(dir, ".installed")); err != nil {
		return "", fmt.Errorf("%w: %s has no install stamp", errNoClients, dir)
	}
	return filepath.Join(dir, "venv", "bin", "python"), nil
}

// RequirePython is Python, failing t (CI) or skipping it when missing.
func RequirePython(t testenv.TB) string {
	t.Helper()
	py, err := Python()
	testenv.Require(t, err)
	return py
}

// Batch is messages produced with one schema: Records are Python
// expressions (datetime, date, time, timezone, Decimal, UUID and, for
// protobuf, Timestamp, StringValue, google.type's Date and TimeOfDay and
// the .proto's classes are in scope) of the values the serializer is
// given, so that logical types go in as the Python types the serializer
// maps (a datetime for timestamp-millis, a Decimal for decimal). Raw,
// instead, are message bodies produced as they are (corrupt messages).
type Batch struct {
	// Format is "avro", "protobuf" or "json_schema".
	Format string `json:"format,omitempty"`
	// Schema is the schema's text: for protobuf a .proto file, which
	// Produce compiles with protoc (grpcio-tools) into the message classes
	// Confluent's serializer takes; Message names the class of Records
	// (the file's messages and enums are in scope).
	Schema  string   `json:"schema,omitempty"`
	Message string   `json:"message,omitempty"`
	Records []string `json:"records,omitempty"`
	Raw     [][]byte `json:"raw,omitempty"`
	// References are schemas the batch's schema references. Avro and JSON
	// Schema: each is registered under its Subject, then the batch's schema
	// under the topic's subject with the references, and the serializer
	// uses that registered version (auto-registration off, as producers
	// with references run). Protobuf: each is a .proto file the schema
	// imports by Name, which the serializer registers under its Subject
	// and references, as Confluent's does with imports.
	References []Reference `json:"references,omitempty"`
}

// Reference is a schema another references: Name is how the referencing
// schema names it (an Avro type's full name, a .proto import path).
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Schema  string `json:"schema"`
}

// ProduceOptions say where Produce writes.
type ProduceOptions struct {
	Brokers string // host:port
	Topic   string
	// Registry is the registry's URL; Username and Password (or Token) its
	// credentials, when it requires some.
	Registry           string
	Username, Password string
	Token              string
	// KeyField, when set, keys each message by that field of its record
	// (a dict), as a producer keys by the table's hashBy column, so that
	// the messages spread over a topic's partitions by key.
	KeyField string
}

// Serialize serializes batches in order with Confluent's serializers, as
// Produce does (o.Topic names the value subject, o.Brokers is not used),
// and returns the messages' bytes instead of producing them: the bodies a
// producer would put on any other transport.
func Serialize(ctx context.Context, python string, o ProduceOptions, batches ...Batch) ([][]byte, error) {
	o.Brokers = ""
	spec, err := json.Marshal(map[string]any{"options": o, "batches": batches})
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, python, "-c", produceScript)
	cmd.Stdin = bytes.NewReader(spec)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("testregistry: serializing with confluent-kafka's serializers: %w\n%s", err, stderr.Bytes())
	}
	var msgs [][]byte
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		m, err := base64.StdEncoding.DecodeString(string(line))
		if err != nil {
			return nil, fmt.Errorf("testregistry: serializer output %q: %w", line, err)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// Produce serializes and produces batches in order with Confluent's
// serializers (registering each schema under the topic's value subject,
// <topic>-value, and its references under theirs) and waits until the
// broker has them all.
func Produce(ctx context.Context, python string, o ProduceOptions, batches ...Batch) error {
	spec, err := json.Marshal(map[string]any{"options": o, "batches": batches})
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, python, "-c", produceScript)
	cmd.Stdin = bytes.NewReader(spec)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("testregistry: producing with confluent-kafka's serializers: %w\n%s", err, out)
	}
	return nil
}
