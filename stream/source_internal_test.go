package stream

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
)

// TestReconnectBackoffResets: the backoff between failed sessions grows
// while sessions cannot reach their server and starts again from the first
// delay after a session that did (the NATS source used to keep the grown
// delay for good: a server restart after a long outage cost 10 s a time).
func TestReconnectBackoffResets(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Sessions: three fail before reaching the server, one reaches it and
	// then fails, two fail again; then the test stops.
	reached := []bool{false, false, false, true, false, false}
	var waits []int
	i := 0
	session := func(context.Context) (bool, error) {
		r := reached[i]
		i++
		if i == len(reached) {
			cancel()
		}
		return r, errors.New("down")
	}
	wait := func(_ context.Context, attempt int) error {
		waits = append(waits, attempt)
		return nil
	}
	c := newCounters("t", "nats")
	if err := reconnect(ctx, slog.New(slog.DiscardHandler), c, session, wait); !errors.Is(err, context.Canceled) {
		t.Fatalf("reconnect: %v, want context.Canceled", err)
	}
	if want := []int{0, 1, 2, 0, 1}; !slices.Equal(waits, want) {
		t.Fatalf("backoff attempts %v, want %v (reset after the session that reached its server)", waits, want)
	}
	if c.Errors.Load() != int64(len(reached)-1) {
		t.Errorf("errors counted %d, want %d", c.Errors.Load(), len(reached)-1)
	}
}

// TestPlanStart: where an assigned Kafka partition starts, for stored
// positions of the same log, of a recreated one (another topic ID, or an
// offset past the end: positions stored before the ID was kept are 8
// bytes and have only the second test), of a log whose start moved past
// them, and committed offsets inside and outside the log.
func TestPlanStart(t *testing.T) {
	idA, idB := [16]byte{1}, [16]byte{2}
	for _, c := range []struct {
		name      string
		pos       kafkaPosition
		stored    bool
		committed int64
		id        [16]byte
		logStart  int64
		end       int64
		known     bool
		start     int64
		reset     bool
		lost      int64
	}{
		{"same log, stored later than committed", kafkaPosition{500, idA}, true, 200, idA, 0, 3000, true, 500, false, 0},
		{"same log, committed later", kafkaPosition{100, idA}, true, 200, idA, 0, 3000, true, 200, false, 0},
		{"recreated: another topic ID", kafkaPosition{100, idA}, true, 50, idB, 0, 3000, true, 0, true, 0},
		{"recreated: a position of 8 bytes past the end", kafkaPosition{5000, [16]byte{}}, true, -1, idB, 0, 3000, true, 0, true, 0},
		{"truncated: past the end, same ID", kafkaPosition{5000, idA}, true, -1, idA, 10, 3000, true, 10, true, 0},
		{"retention moved the log start past the position", kafkaPosition{50, idA}, true, -1, idA, 80, 3000, true, 80, false, 30},
		{"nothing stored, committed past the end", kafkaPosition{}, false, 5000, idA, 0, 3000, true, -1, false, 0},
		{"nothing stored, nothing committed", kafkaPosition{}, false, -1, idA, 0, 3000, true, -1, false, 0},
		{"log bounds unknown", kafkaPosition{5000, idA}, true, 200, idB, 0, 0, false, 5000, false, 0},
	} {
		plan := planStart(c.pos, c.stored, c.committed, c.id, c.logStart, c.end, c.known)
		if plan.start != c.start || (plan.reset != "") != c.reset || plan.lost != c.lost {
			t.Errorf("%s: %+v, want start %d, reset %v, lost %d", c.name, plan, c.start, c.reset, c.lost)
		}
	}
}
