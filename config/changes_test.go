package config

import (
	"strings"
	"testing"
)

// TestKafkaChangesValidated: a change stream's format is one of the three,
// format field names its field, and field and delete belong to format
// field only.
func TestKafkaChangesValidated(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	good := `
tables:
  - name: events
    sources:
      - kafka: {brokers: [127.0.0.1:9092], topics: [a], group: g1, changes: {format: debezium, key_column: id}}
      - kafka: {brokers: [127.0.0.1:9092], topics: [b], group: g2, changes: {format: field, field: op, delete: [D]}}
      - kafka: {brokers: [127.0.0.1:9092], topics: [c], group: g3, changes: {format: tombstones}}
`
	cfg, err := Parse([]byte(good), env)
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Tables[0].Sources[1].Kafka.Changes; c == nil || c.Field != "op" || len(c.Delete) != 1 {
		t.Fatalf("changes of source 1: %+v", c)
	}
	bad := `
tables:
  - name: events
    sources:
      - kafka: {brokers: [127.0.0.1:9092], topics: [a], group: g1, changes: {format: maxwell}}
      - kafka: {brokers: [127.0.0.1:9092], topics: [b], group: g2, changes: {format: field}}
      - kafka: {brokers: [127.0.0.1:9092], topics: [c], group: g3, changes: {format: debezium, field: op}}
`
	_, err = Parse([]byte(bad), env)
	if err == nil {
		t.Fatal("bad changes accepted")
	}
	for _, want := range []string{`sources[0] kafka changes: format "maxwell"`, "sources[1] kafka changes: field: empty", "sources[2] kafka changes: field and delete: only format field"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
