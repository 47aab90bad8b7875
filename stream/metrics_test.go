package stream

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// namedSource is a Source that only has a name and counters: the
// collector reads nothing else.
type namedSource struct {
	name     string
	counters *Counters
}

func (s namedSource) Run(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
func (s namedSource) Name() string                  { return s.name }
func (s namedSource) Counters() *Counters           { return s.counters }

// TestCollector: one series per source and per partition held, read at the
// scrape; two sources with one table and name (a consumer group configured
// twice) are summed, up only when both are, the larger lag of a partition
// both report, instead of a second series with the same labels, which a
// registry refuses (the page would lose them and log an error per scrape).
func TestCollector(t *testing.T) {
	a, b, other := newCounters("events", "kafka"), newCounters("events", "kafka"), newCounters("clicks", "nats")
	a.add(Result{Messages: 3, Rows: 5, Accepted: 4, Filtered: 1})
	b.add(Result{Messages: 2, Rows: 2, Accepted: 2})
	a.SetLag("t", 0, 7)
	b.SetLag("t", 0, 9)
	b.SetLag("t", 1, -2)
	b.fail(errors.New("broker down"))
	other.SetLag("s", 0, 1)
	r := NewRunner(nil, namedSource{"kafka g[t]", a}, namedSource{"kafka g[t]", b}, namedSource{"nats s/d", other})

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(r.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var page strings.Builder
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&page, f); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{
		"# HELP sluice_source_messages_total Messages consumed from the source.\n# TYPE sluice_source_messages_total counter\n",
		`sluice_source_messages_total{source="kafka g[t]",table="events"} 5`,
		`sluice_source_rows_accepted_total{source="kafka g[t]",table="events"} 6`,
		`sluice_source_batches_total{source="kafka g[t]",table="events"} 2`,
		`sluice_source_messages_total{source="nats s/d",table="clicks"} 0`,
		`sluice_source_up{source="kafka g[t]",table="events"} 0`,
		`sluice_source_up{source="nats s/d",table="clicks"} 1`,
		`sluice_source_lag_messages{partition="0",table="events",topic="t"} 9`,
		`sluice_source_lag_messages{partition="1",table="events",topic="t"} -2`,
		`sluice_source_lag_messages{partition="0",table="clicks",topic="s"} 1`,
	} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, page.String())
		}
	}
	if len(families) != len(sourceCounters)+2 {
		t.Errorf("%d families, want %d", len(families), len(sourceCounters)+2)
	}

	// No sources: no series, and so no family.
	empty := prometheus.NewPedanticRegistry()
	empty.MustRegister(NewRunner(nil).Collector())
	if families, err := empty.Gather(); err != nil || len(families) != 0 {
		t.Errorf("no sources: %d families, %v", len(families), err)
	}
}
