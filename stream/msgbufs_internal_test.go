package stream

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/table"
)

// TestStorePartitionReusesMessages: batches stored one after the other
// through the reused messages slices (Kafka.msgBufs) keep each batch's own
// messages only (every row with its offset and its batch's source range),
// and a slice given back holds no message (no fetch buffer kept alive).
func TestStorePartitionReusesMessages(t *testing.T) {
	ctx := context.Background()
	s, err := table.Open(t.TempDir(), table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb, err := s.Table(table.Config{Name: "events"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKafka(Target{Store: s, Table: tb, SourceColumns: true}, "events", KafkaOptions{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, Group: "g", Metadata: []string{"offset"}})
	if err != nil {
		t.Fatal(err)
	}
	offset := int64(0)
	wantBatch := map[int64]string{}
	for _, size := range []int{3, 2, 1, 4} {
		p := kgo.FetchTopicPartition{Topic: "t", FetchPartition: kgo.FetchPartition{Partition: 0}}
		first := offset
		for range size {
			p.Records = append(p.Records, &kgo.Record{Topic: "t", Partition: 0, Offset: offset, Value: fmt.Appendf(nil, `{"n":%d}`, offset)})
			offset++
		}
		for o := first; o < offset; o++ {
			wantBatch[o] = fmt.Sprintf("kafka/t/0/%x@%d-%d", make([]byte, 8), first, offset)
		}
		if err := k.storePartition(ctx, p); err != nil {
			t.Fatal(err)
		}
		b := <-k.msgBufs
		if len(b) != 0 {
			t.Fatalf("after a batch of %d: a messages slice of length %d given back", size, len(b))
		}
		for i, m := range b[:cap(b)] {
			if m.Body != nil || m.Topic != "" || m.Offset != 0 {
				t.Fatalf("after a batch of %d: message %d of the slice given back still holds %q at offset %d", size, i, m.Body, m.Offset)
			}
		}
		k.msgBufs <- b
	}
	var rows []table.Row
	if err := tb.Query(ctx, table.Query{Columns: []string{"n", "_offset", table.SourceBatchColumn, table.SourceOffsetColumn}}, func(r table.Row) error {
		rows = append(rows, maps.Clone(r))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(rows) != int(offset) {
		t.Fatalf("%d rows stored, want %d: %v", len(rows), offset, rows)
	}
	seen := map[int64]bool{}
	for _, r := range rows {
		n, _ := r["n"].(int64)
		if seen[n] || r["_offset"] != n || r[table.SourceOffsetColumn] != n || r[table.SourceBatchColumn] != wantBatch[n] {
			t.Fatalf("row %v: want n once, _offset and %s %d, %s %q", r, table.SourceOffsetColumn, n, table.SourceBatchColumn, wantBatch[n])
		}
		seen[n] = true
	}
}
