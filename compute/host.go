package compute

import (
	"context"
	"fmt"
	"log/slog"
	"sort"

	"github.com/sluicedb/sluice/computeopt"
	"github.com/sluicedb/sluice/luavm"
)

// ScriptHost is what a Lua function's host modules get: the values
// sluice.config reads, and the bounds of its log lines and metric series
// (docs/compute.md, "Host modules").
type ScriptHost = computeopt.ScriptHost

// ScriptLimits are the log rate limit and series cap of the functions that
// set none of their own.
type ScriptLimits struct {
	LogRate   float64
	LogBurst  int
	MaxSeries int
}

func checkScriptHost(where string, h ScriptHost) []error {
	var errs []error
	if h.LogBurst < 0 {
		errs = append(errs, fmt.Errorf("%s: negative log_burst %d", where, h.LogBurst))
	}
	if h.MaxSeries < 0 {
		errs = append(errs, fmt.Errorf("%s: negative max_series %d", where, h.MaxSeries))
	}
	keys := make([]string, 0, len(h.Params))
	for k := range h.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch h.Params[k].(type) {
		case string, bool, int, int64, uint64, float64:
		default:
			errs = append(errs, fmt.Errorf("%s: params.%s: a %T; params are strings, numbers or bools", where, k, h.Params[k]))
		}
	}
	return errs
}

// newHost makes the Host of a Lua function: one per column or filter,
// kept across reloads, closed with the Processor.
func (p *Processor) newHost(f *function, h ScriptHost) *luavm.Host {
	lim := p.opts.ScriptLimits
	opts := luavm.HostOptions{
		Logger: p.log, Table: p.opts.Table, Column: f.name, Filter: f.filter, Script: f.src.String(),
		Params: h.Params, LogRate: lim.LogRate, LogBurst: lim.LogBurst, MaxSeries: lim.MaxSeries, Metrics: p.opts.ScriptMetrics,
	}
	if f.src.Kind == SourceInline {
		opts.Script = f.name
	}
	if h.LogRate != 0 {
		opts.LogRate = h.LogRate
	}
	if h.LogBurst != 0 {
		opts.LogBurst = h.LogBurst
	}
	if h.MaxSeries != 0 {
		opts.MaxSeries = h.MaxSeries
	}
	return luavm.NewHost(opts)
}

// WithRowSource returns ctx carrying where the rows of the batch given to
// Process or ProcessColumns with it came from: locate(i) is the attributes
// of input row i (file and line, topic, partition and offset, the
// request), which a script's log line about that row carries under
// "source". It is called only for the rows a script logs about, so a
// caller pays nothing per row.
func WithRowSource(ctx context.Context, locate func(row int) []slog.Attr) context.Context {
	return luavm.WithRowLocator(ctx, locate)
}

// withRowsAt returns ctx whose row locator (if any) takes the index of a
// row in a batch made of the input rows at idx.
func withRowsAt(ctx context.Context, idx []int) context.Context {
	locate := luavm.RowLocatorOf(ctx)
	if locate == nil {
		return ctx
	}
	return luavm.WithRowLocator(ctx, rowsAt(locate, idx))
}

// rowsAt is locate for a batch made of the rows at idx.
func rowsAt(locate luavm.RowLocator, idx []int) luavm.RowLocator {
	return func(i int) []slog.Attr {
		if i < 0 || i >= len(idx) {
			return nil
		}
		return locate(idx[i])
	}
}
