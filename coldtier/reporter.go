package coldtier

import (
	"context"

	"github.com/apache/iceberg-go/metrics"
)

// retryReporter is the iceberg-go metrics reporter of one Compactor's
// catalog (catalog.Open registers it for that catalog alone): each
// commit's report gives the attempts iceberg-go made, whose retries
// (conflicts with other writers at the catalog's compare-and-swap) it adds
// to the Compactor's counters.
type retryReporter struct{ counters *Counters }

func (r retryReporter) Report(_ context.Context, report metrics.MetricsReport) {
	var rep metrics.CommitReport
	switch x := report.(type) {
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
	r.counters.CommitRetries.Add(rep.Metrics.Attempts.Value - 1)
}

func (retryReporter) Close() error { return nil }
