package coldtier

import (
	"context"
	"sync"

	"github.com/apache/iceberg-go/metrics"
)

// reporterName is the iceberg-go metrics reporter this package registers:
// it receives each commit's report, whose attempt count gives the commit
// retries (conflicts with other writers) per table.
const reporterName = "sluice-coldtier"

var (
	countersMu sync.Mutex
	countersBy = map[string]*Counters{} // by "namespace.table"
)

func registerCounters(name string, c *Counters) {
	countersMu.Lock()
	defer countersMu.Unlock()
	countersBy[name] = c
}

func unregisterCounters(name string, c *Counters) {
	countersMu.Lock()
	defer countersMu.Unlock()
	if countersBy[name] == c {
		delete(countersBy, name)
	}
}

type retryReporter struct{}

func (retryReporter) Report(_ context.Context, r metrics.MetricsReport) {
	var rep metrics.CommitReport
	switch x := r.(type) {
	case metrics.CommitReport:
		rep = x
	case *metrics.CommitReport:
		if x == nil {
			return
		}
		rep = *x
	default:
		return
	}
	if rep.Metrics.Attempts == nil || rep.Metrics.Attempts.Value <= 1 {
		return
	}
	countersMu.Lock()
	c := countersBy[rep.TableName]
	countersMu.Unlock()
	if c != nil {
		c.CommitRetries.Add(rep.Metrics.Attempts.Value - 1)
	}
}

func (retryReporter) Close() error { return nil }

func init() {
	metrics.Register(reporterName, func(map[string]string) (metrics.Reporter, error) { return retryReporter{}, nil })
}
