package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Source is one configured stream of one table.
type Source interface {
	// Run consumes until ctx is done; it returns only then (connection
	// failures are retried with backoff and reported by Status), or when
	// the source cannot work at all (its config is unusable).
	Run(ctx context.Context) error
	// Name says which, e.g. `kafka events[events]`.
	Name() string
	Counters() *Counters
}

// checkStart refuses a start position other than StartEarliest and
// StartLatest: a typo must not consume a topic from its beginning.
func checkStart(start string) error {
	if start != StartEarliest && start != StartLatest {
		return fmt.Errorf("stream: start %q: want %s or %s", start, StartEarliest, StartLatest)
	}
	return nil
}

// Counters are a source's totals and gauges, read by /metrics and /readyz.
type Counters struct {
	Table, Kind string
	// Messages consumed, rows decoded, stored, filtered out, dead letters,
	// poison messages, batches committed.
	Messages, Rows, Accepted, Filtered, DeadLetters, Poison, Batches atomic.Int64
	// Errors counts failures retried (broker, store); Rebalances counts
	// partition assignments.
	Errors, Rebalances atomic.Int64
	// Resets counts stored positions given up because their topic or
	// stream was deleted and recreated (or truncated) under the same name:
	// the partition starts again at the new log's beginning.
	Resets atomic.Int64

	mu      sync.Mutex
	lag     map[string]int64 // "topic\x00partition" → messages behind
	failing time.Time        // since when the source cannot reach its server (zero: it can)
	lastErr string
	// missing are the configured topics the brokers say do not exist
	// (checkTopics), since missingSince.
	missing      []string
	missingSince time.Time
}

func newCounters(table, kind string) *Counters {
	return &Counters{Table: table, Kind: kind, lag: map[string]int64{}}
}

func (c *Counters) add(r Result) {
	c.Messages.Add(int64(r.Messages))
	c.Rows.Add(int64(r.Rows))
	c.Accepted.Add(int64(r.Accepted))
	c.Filtered.Add(int64(r.Filtered))
	c.DeadLetters.Add(int64(r.DeadLetters))
	c.Poison.Add(int64(r.Poison))
	c.Batches.Add(1)
}

func lagKey(topic string, partition int32) string {
	return topic + "\x00" + strconv.Itoa(int(partition))
}

// SetLag records how far a partition (or stream) is behind. It is not
// clamped at 0: a negative lag is a position past the end of its log,
// which must show, not look caught up.
func (c *Counters) SetLag(topic string, partition int32, lag int64) {
	c.mu.Lock()
	c.lag[lagKey(topic, partition)] = lag
	c.mu.Unlock()
}

func (c *Counters) dropLag(topic string, partition int32) {
	c.mu.Lock()
	delete(c.lag, lagKey(topic, partition))
	c.mu.Unlock()
}

// Lag returns the lag per "topic/partition".
func (c *Counters) Lag() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.lag))
	for k, v := range c.lag {
		out[strings.Replace(k, "\x00", "/", 1)] = v
	}
	return out
}

// fail records a connection or store failure.
func (c *Counters) fail(err error) {
	c.Errors.Add(1)
	c.mu.Lock()
	if c.failing.IsZero() {
		c.failing = time.Now()
	}
	c.lastErr = err.Error()
	c.mu.Unlock()
}

// ok records that the source reached its server.
func (c *Counters) ok() {
	c.mu.Lock()
	c.failing = time.Time{}
	c.mu.Unlock()
}

// Failing returns since when the source has been failing and the last
// error (zero time: it is not).
func (c *Counters) Failing() (time.Time, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failing, c.lastErr
}

// setMissing records the configured topics that do not exist (none: all
// do); it returns those missing now that were not before, and those found
// since.
func (c *Counters) setMissing(now time.Time, topics []string) (gone, found []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range topics {
		if !slices.Contains(c.missing, t) {
			gone = append(gone, t)
		}
	}
	for _, t := range c.missing {
		if !slices.Contains(topics, t) {
			found = append(found, t)
		}
	}
	switch {
	case len(topics) == 0:
		c.missingSince = time.Time{}
	case len(c.missing) == 0:
		c.missingSince = now
	}
	c.missing = slices.Clone(topics)
	return gone, found
}

// Missing returns the configured topics that do not exist and since when
// (none: every one does).
func (c *Counters) Missing() ([]string, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.missing), c.missingSince
}

// Runner runs a server's sources.
type Runner struct {
	sources []Source
	log     *slog.Logger
	wg      sync.WaitGroup
	// FailAfter is how long a source may fail before Ready reports it.
	FailAfter time.Duration
	// running counts the Run calls of each source not yet returned, for a
	// shutdown that gives up to name them.
	running sync.Map // Source → *atomic.Bool
}

// Running returns the names of the sources whose Run has not returned.
func (r *Runner) Running() []string {
	var names []string
	for _, s := range r.sources {
		if v, ok := r.running.Load(s); ok && v.(*atomic.Bool).Load() {
			names = append(names, s.Name())
		}
	}
	return names
}

// NewRunner makes a Runner of sources.
func NewRunner(log *slog.Logger, sources ...Source) *Runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{sources: sources, log: log, FailAfter: 5 * time.Second}
}

// Len is the number of sources.
func (r *Runner) Len() int { return len(r.sources) }

// Start runs every source in its own goroutine until ctx is done; Wait
// waits for them to stop.
func (r *Runner) Start(ctx context.Context) {
	for _, s := range r.sources {
		r.wg.Add(1)
		running := &atomic.Bool{}
		running.Store(true)
		r.running.Store(s, running)
		go func() {
			defer r.wg.Done()
			defer running.Store(false)
			r.log.Info("source started", "source", s.Name())
			if err := s.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				r.log.Error("source stopped", "source", s.Name(), "error", err)
				s.Counters().fail(err)
				return
			}
			r.log.Info("source stopped", "source", s.Name())
		}()
	}
}

// Wait waits until every source returned.
func (r *Runner) Wait() { r.wg.Wait() }

// Ready returns an error naming every source that has been failing for
// longer than FailAfter, and every one whose topics have not existed for
// that long: a misspelled topic consumes nothing, as a deleted one.
func (r *Runner) Ready() error {
	var errs []error
	for _, s := range r.sources {
		since, last := s.Counters().Failing()
		if !since.IsZero() && time.Since(since) >= r.FailAfter {
			errs = append(errs, fmt.Errorf("source %s failing for %s: %s", s.Name(), time.Since(since).Round(time.Second), last))
		}
		if missing, since := s.Counters().Missing(); len(missing) > 0 && time.Since(since) >= r.FailAfter {
			errs = append(errs, fmt.Errorf("source %s: topics %s do not exist (for %s)", s.Name(), strings.Join(missing, ", "), time.Since(since).Round(time.Second)))
		}
	}
	return errors.Join(errs...)
}

// reconnect runs session again and again until ctx is done, backing off
// between failed sessions. A session that reached its server (reached
// true) resets the backoff: the next failure waits 100 ms again instead of
// the delay the failures before that session had grown to. wait is backoff
// outside tests.
func reconnect(ctx context.Context, log *slog.Logger, c *Counters, session func(context.Context) (reached bool, err error), wait func(context.Context, int) error) error {
	attempt := 0
	for {
		reached, err := session(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if reached {
			attempt = 0
		}
		log.Warn("session ended, reconnecting", "error", err, "attempt", attempt)
		if err != nil {
			c.fail(err)
		}
		if err := wait(ctx, attempt); err != nil {
			return err
		}
		attempt++
	}
}

// backoff sleeps for the attempt's delay (100 ms doubling to 10 s) or until
// ctx is done.
func backoff(ctx context.Context, attempt int) error {
	d := 100 * time.Millisecond << min(attempt, 7)
	d = min(d, 10*time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
