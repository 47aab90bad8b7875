// Package goplugin opens Go plugins for compute: a binary that loads plugin
// columns calls compute.EnablePlugins(goplugin.Open) first thing in main.
//
// It is the one package that imports package plugin, which makes the linker
// export every symbol of the binary and keep every exported method; keeping
// it out of compute keeps it out of the binaries that never load a plugin
// (docs/architecture.md). It imports nothing of sluice, so compute's own
// tests can use it.
package goplugin

import "plugin"

// Open is plugin.Open, with the lookup of the plugin's symbols.
func Open(path string) (lookup func(symbol string) (any, error), err error) {
	p, err := plugin.Open(path)
	if err != nil {
		return nil, err
	}
	return func(symbol string) (any, error) { return p.Lookup(symbol) }, nil
}
