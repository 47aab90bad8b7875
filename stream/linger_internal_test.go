package stream

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLingerGathersPolls: the polls of a partition that arrive within
// Linger are stored as one batch, their records in order, up to
// MaxPollRecords (the rest waits for the next batch); a first poll of
// MaxPollRecords records is stored at once; with a negative Linger each
// poll is its own batch; a revoke while gathering drops what was gathered
// (nothing stored, the next owner reads it from the stored position).
func TestLingerGathersPolls(t *testing.T) {
	poll := func(from, n int64) kgo.FetchTopicPartition {
		p := kgo.FetchTopicPartition{Topic: "t"}
		for o := from; o < from+n; o++ {
			p.Records = append(p.Records, &kgo.Record{Offset: o})
		}
		p.HighWatermark = from + n + 100
		return p
	}
	offsets := func(p kgo.FetchTopicPartition) []int64 {
		var out []int64
		for _, r := range p.Records {
			out = append(out, r.Offset)
		}
		return out
	}
	newWorker := func() *partitionWorker {
		return &partitionWorker{records: make(chan kgo.FetchTopicPartition, 4), quit: make(chan struct{})}
	}
	k := &Kafka{opts: KafkaOptions{MaxPollRecords: 10, Linger: 200 * time.Millisecond}}

	w := newWorker()
	w.records <- poll(3, 3)
	w.records <- poll(6, 2)
	start := time.Now()
	p, held := k.linger(w, poll(0, 3))
	if !held || len(p.Records) != 8 {
		t.Fatalf("gathered %v (held %v), want offsets 0-7", offsets(p), held)
	}
	for i, o := range offsets(p) {
		if o != int64(i) {
			t.Fatalf("gathered %v, want offsets 0-7 in order", offsets(p))
		}
	}
	if p.HighWatermark != 108 {
		t.Errorf("high watermark %d, want the last poll's 108", p.HighWatermark)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("returned after %v with 8 of 10 records: want it to wait out the linger", d)
	}

	// Full: stored without waiting; more than the bound stops gathering.
	w = newWorker()
	w.records <- poll(20, 8)
	start = time.Now()
	if p, _ = k.linger(w, poll(10, 10)); len(p.Records) != 10 || time.Since(start) > 100*time.Millisecond {
		t.Errorf("a full poll: %d records after %v, want 10 at once", len(p.Records), time.Since(start))
	}
	if p, _ = k.linger(w, poll(0, 5)); len(p.Records) != 13 {
		t.Errorf("gathered %d records, want the 5 and the waiting 8 (past 10: stored at once)", len(p.Records))
	}

	// No linger: each poll alone.
	w = newWorker()
	w.records <- poll(3, 3)
	k.opts.Linger = -1
	if p, _ = k.linger(w, poll(0, 3)); len(p.Records) != 3 {
		t.Errorf("without a linger: %d records, want the poll's 3", len(p.Records))
	}

	// Revoked while gathering.
	k.opts.Linger = time.Minute
	w = newWorker()
	go func() { time.Sleep(20 * time.Millisecond); close(w.quit) }()
	if _, held = k.linger(w, poll(0, 3)); held {
		t.Error("revoked while gathering: want held false")
	}
}
