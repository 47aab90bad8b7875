package stream

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A source that cannot consume says so three ways: sluice_source_up 0,
// /readyz (Runner.Ready), and the log. The log says it when it starts,
// again at most once each healthLogEvery while it lasts, and when it ends:
// a client retrying every few hundred milliseconds would otherwise bury
// every other line, or (before) say nothing at all.

// healthLogEvery is how often a condition that lasts is logged again.
const healthLogEvery = time.Minute

// logEvery says whether a condition that lasts is to be logged now: the
// first time, then once each period. reset starts over (the condition
// ended).
type logEvery struct {
	mu sync.Mutex
	// period is healthLogEvery when zero.
	period time.Duration
	last   time.Time
	// quiet counts the occurrences not logged since the last line.
	quiet int
}

// due reports whether to log now, and how many occurrences went unlogged
// before.
func (l *logEvery) due(now time.Time) (ok bool, quiet int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	period := l.period
	if period == 0 {
		period = healthLogEvery
	}
	if !l.last.IsZero() && now.Sub(l.last) < period {
		l.quiet++
		return false, 0
	}
	l.last, quiet, l.quiet = now, l.quiet, 0
	return true, quiet
}

// reset reports whether the condition had been logged (so its end is
// worth a line), and starts over.
func (l *logEvery) reset() (wasLogged bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	wasLogged = !l.last.IsZero()
	l.last, l.quiet = time.Time{}, 0
	return wasLogged
}

// checkTopics asks the brokers whether every configured topic exists. A
// consumer group subscribed to a topic that does not exist is assigned
// nothing and fetches nothing, without an error anywhere: this is the one
// place that sees it. The client does not create topics (franz-go's
// consumers never ask the broker to), so a misspelled topic stays
// missing, and reported, until it is created.
func (k *Kafka) checkTopics(ctx context.Context, adm *kadm.Client) {
	meta, err := adm.Metadata(ctx, k.opts.Topics...)
	if err != nil {
		return // unreachable brokers are the connect hook's to report
	}
	var missing []string
	for _, t := range k.opts.Topics {
		d, ok := meta.Topics[t]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			missing = append(missing, t)
		}
	}
	now := time.Now()
	gone, found := k.counters.setMissing(now, missing)
	if len(found) > 0 {
		k.log.Info("kafka topics exist now: consuming them", "topics", found)
	}
	if len(missing) == 0 {
		k.missingLog.reset()
		return
	}
	if len(gone) > 0 {
		k.missingLog.reset() // a topic newly missing is worth a line at once
	}
	if ok, quiet := k.missingLog.due(now); ok {
		_, since := k.counters.Missing()
		k.log.Warn("kafka topics do not exist: nothing of them is consumed (a misspelled or deleted topic; sluice does not create topics)",
			"topics", missing, "missing_for", now.Sub(since).Round(time.Second).String(), "checks_not_logged", quiet)
	}
}

// connectHook reports whether the client reaches its brokers: in the
// counters (sluice_source_up, /readyz) and in the log, rate-limited.
type connectHook struct {
	c   *Counters
	log *slog.Logger
	// failing limits the log's lines of connection failures.
	failing *logEvery
}

func (h connectHook) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	addr := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	if err != nil {
		h.c.fail(err)
		if ok, quiet := h.failing.due(time.Now()); ok {
			since, _ := h.c.Failing()
			h.log.Error("cannot reach the kafka broker: retrying (nothing is consumed meanwhile)",
				"broker", addr, "error", err, "failing_for", time.Since(since).Round(time.Second).String(), "failures_not_logged", quiet)
		}
		return
	}
	h.c.ok()
	if h.failing.reset() {
		h.log.Info("reached the kafka broker again", "broker", addr)
	}
}
