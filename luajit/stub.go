//go:build !luajit || !cgo

package luajit

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/luavm"
)

// Available reports whether this binary was built with the LuaJIT engine.
const Available = false

// Engine is the LuaJIT engine; in this build it cannot be created.
type Engine struct{}

// Script is a loaded script; in this build there are none.
type Script struct{}

// Config is a script's config, see the luajit build.
type Config struct {
	Timeout        time.Duration
	MemoryLimit    int64
	MaxResultBytes int64
	PoolSize       int
	Allow          []string
	SourceName     string
	FuncName       string
	Host           *luavm.Host
}

// New returns ErrUnavailable: the binary was built without the luajit tag.
func New() (*Engine, error) { return nil, ErrUnavailable }

// Load is never reached in this build.
func (*Engine) Load(string, string, Config) (*Script, error) { return nil, ErrUnavailable }

// Close does nothing.
func (*Engine) Close() error { return nil }

// Stuck reports nothing in this build.
func (*Engine) Stuck() []luavm.StuckCall { return nil }

// Collector collects nothing in this build.
func (*Engine) Collector() prometheus.Collector { return noCollector{} }

type noCollector struct{}

func (noCollector) Describe(chan<- *prometheus.Desc) {}
func (noCollector) Collect(chan<- prometheus.Metric) {}

// Values is never reached in this build.
func (*Script) Values(context.Context, []map[string]any, []any, []error) error {
	return ErrUnavailable
}

// ValuesColumns is never reached in this build.
func (*Script) ValuesColumns(context.Context, *colbatch.Batch, []int, []any, []error) error {
	return ErrUnavailable
}

// ValuesColumnsNumbers is never reached in this build.
func (*Script) ValuesColumnsNumbers(context.Context, *colbatch.Batch, []int, []any, []float64, []error) error {
	return ErrUnavailable
}

// Close does nothing.
func (*Script) Close() error { return nil }
