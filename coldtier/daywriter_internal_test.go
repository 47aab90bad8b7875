package coldtier

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestDayWriterRefusesOtherDays: a day writer refuses a batch with an
// event time outside its day (its files' partition value would be wrong)
// and takes one within it, the day's first and last microseconds and
// nulls included.
func TestDayWriterRefusesOtherDays(t *testing.T) {
	day := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	typ := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	schema := arrow.NewSchema([]arrow.Field{{Name: "ts", Type: typ, Nullable: true}}, nil)
	batch := func(times ...time.Time) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		tb := b.Field(0).(*array.TimestampBuilder)
		for _, ts := range times {
			if ts.IsZero() {
				tb.AppendNull()
				continue
			}
			tb.Append(arrow.Timestamp(ts.UnixMicro()))
		}
		return b.NewRecordBatch()
	}
	w := &dayWriter{plan: &dayPlan{sortCol: 0}, day: dayIndex(day.UnixNano())}
	in := batch(day, time.Time{}, day.Add(24*time.Hour-time.Microsecond))
	defer in.Release()
	if err := w.checkDay(in); err != nil {
		t.Errorf("a batch within the day: %v", err)
	}
	for _, ts := range []time.Time{day.Add(-time.Microsecond), day.Add(24 * time.Hour)} {
		out := batch(day, ts)
		err := w.checkDay(out)
		out.Release()
		if err == nil || !strings.Contains(err.Error(), "outside the day partition") {
			t.Errorf("a batch with %v: %v, want an error naming the day partition", ts, err)
		}
	}
}
