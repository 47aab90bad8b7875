package stream

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector returns a prometheus.Collector of the sources' Counters: it
// reads them at each scrape, for whoever owns the registry (the server's
// /metrics) to register. With no sources it collects nothing.
func (r *Runner) Collector() prometheus.Collector { return collector{r} }

type collector struct{ r *Runner }

// sourceCounter is a counter family with one series per source.
type sourceCounter struct {
	desc  *prometheus.Desc
	value func(*Counters) int64
}

func newSourceCounter(name, help string, value func(*Counters) int64) sourceCounter {
	return sourceCounter{prometheus.NewDesc(name, help, []string{"table", "source"}, nil), value}
}

var (
	sourceCounters = []sourceCounter{
		newSourceCounter("sluice_source_messages_total", "Messages consumed from the source.", func(c *Counters) int64 { return c.Messages.Load() }),
		newSourceCounter("sluice_source_rows_total", "Rows decoded from the source's messages.", func(c *Counters) int64 { return c.Rows.Load() }),
		newSourceCounter("sluice_source_rows_accepted_total", "Rows stored (committed with their position).", func(c *Counters) int64 { return c.Accepted.Load() }),
		newSourceCounter("sluice_source_rows_filtered_total", "Rows dropped by filters or drop policies.", func(c *Counters) int64 { return c.Filtered.Load() }),
		newSourceCounter("sluice_source_dead_letters_total", "Dead letters written (poison messages, bad lines, deadletter policies).", func(c *Counters) int64 { return c.DeadLetters.Load() }),
		newSourceCounter("sluice_source_poison_messages_total", "Messages routed away as a whole.", func(c *Counters) int64 { return c.Poison.Load() }),
		newSourceCounter("sluice_source_batches_total", "Batches committed.", func(c *Counters) int64 { return c.Batches.Load() }),
		newSourceCounter("sluice_source_errors_total", "Failures retried (broker unreachable, store errors).", func(c *Counters) int64 { return c.Errors.Load() }),
		newSourceCounter("sluice_source_rebalances_total", "Partition assignments received.", func(c *Counters) int64 { return c.Rebalances.Load() }),
		newSourceCounter("sluice_source_position_resets_total", "Stored positions given up because the topic or stream was recreated (or truncated): consumed again from the new log's beginning.", func(c *Counters) int64 { return c.Resets.Load() }),
	}
	lagDesc = prometheus.NewDesc("sluice_source_lag_messages", "Messages in the partition (or stream) not yet stored by this node.", []string{"table", "topic", "partition"}, nil)
	upDesc  = prometheus.NewDesc("sluice_source_up", "1 when the source reaches its server and every topic it consumes exists.", []string{"table", "source"}, nil)
)

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range sourceCounters {
		ch <- f.desc
	}
	ch <- lagDesc
	ch <- upDesc
}

// Collect sums sources that share a table and a name (two members of one
// consumer group, configured twice): a registry takes one series per label
// set. A partition both report (briefly, across a rebalance) shows the
// larger lag; the pair is up only when both are.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ table, name string }
	type sums struct {
		key
		values []int64
		up     bool
	}
	var all []*sums
	byKey := map[key]*sums{}
	lag := map[[3]string]int64{} // table, topic, partition
	for _, s := range c.r.sources {
		counters := s.Counters()
		k := key{counters.Table, s.Name()}
		sum, ok := byKey[k]
		if !ok {
			sum = &sums{key: k, values: make([]int64, len(sourceCounters)), up: true}
			byKey[k] = sum
			all = append(all, sum)
		}
		for i, f := range sourceCounters {
			sum.values[i] += f.value(counters)
		}
		if since, _ := counters.Failing(); !since.IsZero() {
			sum.up = false
		}
		if missing, _ := counters.Missing(); len(missing) > 0 {
			sum.up = false // it reaches its brokers, but what it is to consume is not there
		}
		for tp, v := range counters.Lag() {
			i := strings.LastIndexByte(tp, '/')
			lk := [3]string{counters.Table, tp[:i], tp[i+1:]}
			if old, seen := lag[lk]; !seen || v > old {
				lag[lk] = v
			}
		}
	}
	for _, sum := range all {
		for i, f := range sourceCounters {
			ch <- prometheus.MustNewConstMetric(f.desc, prometheus.CounterValue, float64(sum.values[i]), sum.table, sum.name)
		}
		up := 0.0
		if sum.up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up, sum.table, sum.name)
	}
	for k, v := range lag {
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(v), k[0], k[1], k[2])
	}
}
