package keyroute

import (
	"encoding/json"
	"testing"
)

func TestKeyText(t *testing.T) {
	for _, c := range []struct {
		v    any
		typ  string
		want string
		ok   bool
	}{
		{"u7", "string", "u7", true},
		{"", "string", "", true},
		{7.0, "string", "", false},
		{"007", "int64", "7", true},
		{" -12 ", "int64", "-12", true},
		{json.Number("42"), "int64", "42", true},
		{42.0, "int64", "42", true},
		{42.5, "int64", "", false},
		{"x", "int64", "", false},
		{"1.5", "float64", "", false},
	} {
		got, ok := keyText(c.v, c.typ)
		if got != c.want || ok != c.ok {
			t.Errorf("keyText(%#v, %s) = %q, %v; want %q, %v", c.v, c.typ, got, ok, c.want, c.ok)
		}
	}
}

func TestKafkaSourceOf(t *testing.T) {
	tp, ok := kafkaSourceOf("kafka/events/3/0123456789abcdef@10-20")
	if !ok || tp != (topicPartition{"events", 3}) {
		t.Fatalf("got %v, %v", tp, ok)
	}
	for _, bad := range []string{"", "kafka/events/3/id", "nats/EVENTS/x@1-2", "kafka/events/x/id@1-2", "kafka/a/b/3/id@1-2"} {
		if _, ok := kafkaSourceOf(bad); ok {
			t.Errorf("kafkaSourceOf(%q) parsed", bad)
		}
	}
}
