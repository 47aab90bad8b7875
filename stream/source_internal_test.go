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
