package stream

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestOptionsDefaults: EnsureDefaults fills the zero fields and keeps the
// set ones; the sources take the defaults of what their options leave
// unset, and refuse a start position they do not know (config checks it
// too; a caller of the package must not consume from the beginning for a
// typo).
func TestOptionsDefaults(t *testing.T) {
	if got, want := *(*KafkaOptions)(nil).EnsureDefaults(), (KafkaOptions{Format: FormatNDJSON, Start: StartEarliest,
		MaxPollRecords: DefaultMaxPollRecords, FetchMaxBytes: DefaultFetchMaxBytes, Linger: DefaultLinger}); !reflect.DeepEqual(got, want) {
		t.Errorf("Kafka defaults %+v, want %+v", got, want)
	}
	if got, want := *(*NATSOptions)(nil).EnsureDefaults(), (NATSOptions{Format: FormatNDJSON, Start: StartEarliest,
		MaxBatch: DefaultMaxBatch, FetchWait: DefaultFetchWait}); !reflect.DeepEqual(got, want) {
		t.Errorf("NATS defaults %+v, want %+v", got, want)
	}
	k := KafkaOptions{Format: FormatCSV, Start: StartLatest, MaxPollRecords: 7, FetchMaxBytes: 9, SessionTimeout: time.Second, Linger: -1}
	if got := *(&KafkaOptions{Format: FormatCSV, Start: StartLatest, MaxPollRecords: 7, FetchMaxBytes: 9, SessionTimeout: time.Second, Linger: -1}).EnsureDefaults(); !reflect.DeepEqual(got, k) {
		t.Errorf("Kafka options set: %+v, want them kept", got)
	}
	n := NATSOptions{Format: FormatParquet, Start: StartLatest, MaxBatch: 7, FetchWait: time.Second}
	if got := *(&NATSOptions{Format: FormatParquet, Start: StartLatest, MaxBatch: 7, FetchWait: time.Second}).EnsureDefaults(); !reflect.DeepEqual(got, n) {
		t.Errorf("NATS options set: %+v, want them kept", got)
	}

	ks, err := NewKafka(Target{}, "events", KafkaOptions{Group: "g", Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	if ks.opts.MaxPollRecords != DefaultMaxPollRecords || ks.opts.FetchMaxBytes != DefaultFetchMaxBytes || ks.opts.Start != StartEarliest {
		t.Errorf("Kafka source options %+v: defaults not taken", ks.opts)
	}
	ns, err := NewNATS(Target{}, "events", NATSOptions{Stream: "S", Durable: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if ns.opts.MaxBatch != DefaultMaxBatch || ns.opts.FetchWait != DefaultFetchWait || ns.opts.Start != StartEarliest {
		t.Errorf("NATS source options %+v: defaults not taken", ns.opts)
	}
	if _, err := NewKafka(Target{}, "events", KafkaOptions{Start: "oldest"}); err == nil || !strings.Contains(err.Error(), `start "oldest": want earliest or latest`) {
		t.Errorf("Kafka start oldest: %v", err)
	}
	if _, err := NewNATS(Target{}, "events", NATSOptions{Start: "oldest"}); err == nil || !strings.Contains(err.Error(), `start "oldest": want earliest or latest`) {
		t.Errorf("NATS start oldest: %v", err)
	}
}
